#include "pager/pager.hpp"

#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/clock.hpp"
#include "core/errors.hpp"

// UFFDIO_MOVE (Linux 6.8) and MADV_COLLAPSE (6.1), for builds against older headers.
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#endif
#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE (0x05)
struct uffdio_move {
  __u64 dst;
  __u64 src;
  __u64 len;
  __u64 mode;
  __s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif
#ifndef UFFDIO_MOVE_MODE_DONTWAKE
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace resid {

namespace {
constexpr uint64_t kHugePage = 2u << 20;  // the PMD size on x86-64 and arm64 with 4 KiB pages
}

const char* to_string(HugeChunks h) {
  switch (h) {
    case HugeChunks::Off: return "off";
    case HugeChunks::Move: return "move";
    case HugeChunks::Collapse: return "collapse";
  }
  return "?";
}

std::optional<HugeChunks> parse_huge_chunks(std::string_view s) {
  if (s == "off") return HugeChunks::Off;
  if (s == "move") return HugeChunks::Move;
  if (s == "collapse") return HugeChunks::Collapse;
  return std::nullopt;
}

uint64_t Pager::page_table_reserve(uint64_t mapped_bytes) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t pte_span = page / 8 * page;          // 512 entries x 4 KiB = 2 MiB
  const uint64_t pmd_span = page / 8 * pte_span;      // 1 GiB
  return ((mapped_bytes + pte_span - 1) / pte_span + (mapped_bytes + pmd_span - 1) / pmd_span) * page;
}


namespace {

// Calls f(p, q) for each maximal run [p, q) of pages not unmapped by the application.
template <class F>
void for_each_mapped_run(const std::vector<uint8_t>& unmapped, uint64_t from, uint64_t to, F&& f) {
  for (uint64_t p = from; p < to;) {
    if (unmapped[p]) {
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < to && !unmapped[q]) ++q;
    f(p, q);
    p = q;
  }
}

}  // namespace

template <class F>
void Pager::fail_with(F&& make) {
  // A failure's message is built on the rejection path (not counted as a read-path
  // allocation), and only once.
  if (failed_) return;
  RejectionPathScope scope;
  fail(make());
}

template <class F>
void Pager::fail_locked_with(F&& make) {
  // The same with mu_ held: the failure callback runs later, from the fault loop.
  if (failed_) return;
  RejectionPathScope scope;
  error_ = make();
  failed_ = true;
  failure_callback_due_ = true;
}

Pager::Pager(std::unique_ptr<Source> source, std::unique_ptr<Policy> policy, PagerConfig cfg,
             Trace* trace)
    : cfg_(cfg),
      source_(std::move(source)),
      policy_(std::move(policy)),
      trace_(trace),
      audit_(0) {
  page_ = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (!source_ || !policy_) throw std::invalid_argument("pager needs a source and a policy");
  if (cfg_.chunk_size == 0 || cfg_.chunk_size % page_ != 0)
    throw InputError("chunk size " + std::to_string(cfg_.chunk_size) +
                     " is not a positive multiple of the page size (" + std::to_string(page_) + ")");
  if (cfg_.budget_chunks == 0) throw InputError("pager budget must be at least one chunk");
  if (source_->window_capacity() < cfg_.chunk_size)
    throw std::invalid_argument("source window smaller than a chunk");
  file_bytes_ = source_->file_size();
  if (file_bytes_ == 0) throw InputError("region file is empty");
  const uint64_t n = (file_bytes_ + cfg_.chunk_size - 1) / cfg_.chunk_size;
  if (n > UINT32_MAX) throw InputError("too many chunks");
  chunks_ = static_cast<uint32_t>(n);
  chunk_pages_ = cfg_.chunk_size / page_;
  registered_bytes_ = (file_bytes_ + page_ - 1) / page_ * page_;
  mapped_bytes_ = n * cfg_.chunk_size;

  // The Plan's manifest: one object per chunk, its file extent (the tail chunk is short).
  {
    std::vector<PlanObjectSpec> specs(chunks_);
    for (ChunkId c = 0; c < chunks_; ++c) {
      const uint64_t off = static_cast<uint64_t>(c) * cfg_.chunk_size;
      specs[c].name = "chunk." + std::to_string(c);
      specs[c].extents.push_back({off, std::min(cfg_.chunk_size, file_bytes_ - off)});
    }
    manifest_ = std::make_unique<PlanManifest>(
        PlanManifest::build(std::move(specs), file_bytes_, source_->alignment(), source_->window_capacity()));
  }
  if (cfg_.huge == HugeChunks::Move) {
    // A read fault on the THP-enabled region takes the huge zero page branch and reaches the
    // pager without allocating; with use_zero_page off it would allocate (and charge) a huge
    // page, then free it, before the pager is even asked: outside the budget.
    std::ifstream z("/sys/kernel/mm/transparent_hugepage/use_zero_page");
    int v = -1;
    if (!(z >> v) || v != 1)
      throw InputError("--huge-chunks move needs /sys/kernel/mm/transparent_hugepage/use_zero_page = 1 (a read "
                       "fault would otherwise allocate a huge page outside the budget before reaching the pager); use "
                       "--huge-chunks off");
  }
  if (cfg_.huge != HugeChunks::Off && cfg_.chunk_size % kHugePage != 0)
    throw InputError(std::string("--huge-chunks ") + to_string(cfg_.huge) + " needs a chunk size that is a multiple of " +
                     std::to_string(kHugePage) + " bytes (got " + std::to_string(cfg_.chunk_size) + ")");
  uffd_ = open_uffd();
  // EVENT_UNMAP: an application munmap must drop chunks, or a later COPY would land in a
  // hole. Not EVENT_REMOVE: our own MADV_DONTNEED would then block waiting for the very
  // thread that issued it to read the event. THREAD_ID (Linux 4.14): the faulting thread,
  // for the per-thread pins of oversize steps. MOVE (6.8): the zero-copy huge chunks.
  uint64_t want = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_THREAD_ID;
  if (cfg_.huge == HugeChunks::Move) want |= UFFD_FEATURE_MOVE;
  if (int e = uffd_.api(want); e != 0) {
    if (cfg_.huge == HugeChunks::Move)
      throw InputError("userfaultfd API handshake failed (" + errno_name(e) +
                       "): --huge-chunks move needs UFFD_FEATURE_MOVE (Linux >= 6.8); use --huge-chunks off");
    throw InputError("userfaultfd API handshake failed (" + errno_name(e) + ")");
  }

  evfd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (evfd_ < 0) throw InputError("eventfd failed (" + errno_name(errno) + ")");

  // 2 MiB aligned (over-map and trim), so a chunk of 2 MiB is one PMD and can be one
  // huge page. UFFDIO_MOVE only moves between writable mappings of equal protection, so
  // the region is writable in `move` mode (llama.cpp maps it read-only and never writes;
  // a write would fault into the pager like a read and land in the pager's private copy).
  const int prot = cfg_.huge == HugeChunks::Move ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = ::mmap(nullptr, mapped_bytes_ + kHugePage, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(evfd_);
    throw InputError("cannot map the pager region (" + errno_name(e) + ")");
  }
  {
    const auto raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (raw + kHugePage - 1) & ~static_cast<uintptr_t>(kHugePage - 1);
    if (aligned > raw) ::munmap(p, aligned - raw);
    const uintptr_t end = raw + mapped_bytes_ + kHugePage;
    if (end > aligned + mapped_bytes_) ::munmap(reinterpret_cast<void*>(aligned + mapped_bytes_), end - aligned - mapped_bytes_);
    base_ = reinterpret_cast<std::byte*>(aligned);
  }
  // `off`: 4 KiB pages only (MADV_NOHUGEPAGE): khugepaged must not collapse behind the
  // budget's back. `collapse`: neither flag, since MADV_COLLAPSE is refused on a
  // VM_NOHUGEPAGE mapping and MADV_HUGEPAGE would invite khugepaged (with THP `madvise`,
  // khugepaged then leaves the region alone; with THP `always` it may collapse too).
  // `move`: MADV_HUGEPAGE, because UFFDIO_MOVE moves a huge page whole only into an empty
  // PMD: a read fault on a THP-enabled anonymous mapping reaches the pager through the
  // huge-page path (the huge zero page branch) without allocating a page table, whereas
  // with NOHUGEPAGE the fault path allocates the PTE table first and the move then splits
  // the window's huge page into 4 KiB pages. khugepaged cannot collapse a chunk with an
  // absent page (userfaultfd-armed), so it only ever sees chunks that are already huge or
  // copied whole (a move that fell back to COPY).
  if (cfg_.huge == HugeChunks::Off) ::madvise(base_, mapped_bytes_, MADV_NOHUGEPAGE);
  if (cfg_.huge == HugeChunks::Move) ::madvise(base_, mapped_bytes_, MADV_HUGEPAGE);
  // Beyond the file's last page there is no data: an access there is a bug, make it fault.
  if (mapped_bytes_ > registered_bytes_)
    ::mprotect(base_ + registered_bytes_, mapped_bytes_ - registered_bytes_, PROT_NONE);

  uffdio_register reg{};
  reg.range.start = reinterpret_cast<uintptr_t>(base_);
  reg.range.len = registered_bytes_;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  if (::ioctl(uffd_.fd(), UFFDIO_REGISTER, &reg) != 0) {
    const int e = errno;
    ::munmap(base_, mapped_bytes_);
    ::close(evfd_);
    throw InputError("UFFDIO_REGISTER (missing mode) failed (" + errno_name(e) + ")");
  }
  if (!(reg.ioctls & (1ULL << _UFFDIO_COPY))) {
    ::munmap(base_, mapped_bytes_);
    ::close(evfd_);
    throw InputError("userfaultfd region does not support UFFDIO_COPY");
  }
  if (cfg_.huge == HugeChunks::Move && !(reg.ioctls & (1ULL << _UFFDIO_MOVE))) {
    ::munmap(base_, mapped_bytes_);
    ::close(evfd_);
    throw InputError("userfaultfd region does not support UFFDIO_MOVE (--huge-chunks move needs Linux >= 6.8); use "
                     "--huge-chunks off");
  }
  state_.assign(chunks_, State::Absent);
  consumers_.assign(chunks_, 0);
  prefetched_unused_.assign(chunks_, 0);
  poisoned_.assign(chunks_, 0);
  pins_.assign(chunks_, 0);
  thread_pins_.reserve(kPinsPerThread * (cfg_.max_pins ? cfg_.max_pins : 16) + kPinsPerThread);
  last_demand_step_.assign(chunks_, -1);
  fills_.assign(chunks_, 0);
  page_unmapped_.assign(registered_bytes_ / page_, 0);
  mapped_pages_.resize(chunks_);
  for (ChunkId c = 0; c < chunks_; ++c) mapped_pages_[c] = static_cast<uint32_t>(pages_in(c));
  resident_list_.reserve(chunks_);
  mincore_buf_.assign(registered_bytes_ / page_, 0);
  audit_ = cfg_.step_chunks.empty() ? SignalAudit(chunks_) : SignalAudit(chunks_, cfg_.step_chunks);
  pending_.reserve(1024);
  candidates_.reserve(64);
  mincore_known_.reserve(registered_bytes_ / page_);

  // The Plan's mutable half: the source's windows, one slot per chunk at its stable address.
  const uint32_t windows = static_cast<uint32_t>(source_->window_count());
  {
    PlanConfig pc;
    pc.windows = windows;
    pc.slot_addresses.resize(chunks_);
    for (ChunkId c = 0; c < chunks_; ++c) pc.slot_addresses[c] = base_ + static_cast<uint64_t>(c) * cfg_.chunk_size;
    pc.slot_bytes = cfg_.chunk_size;
    pc.consumers = 1;  // open consumers: not a declared count
    pc.max_bundle = std::max<uint32_t>(1, std::min<uint32_t>(windows, chunks_));
    pc.eager_reconcile = cfg_.eager_reconcile;
    pc.open_consumers = true;
    plan_ = std::make_unique<Plan>(*manifest_, std::move(pc));
  }
  plan_phase_.resize(chunks_);
  plan_consumers_.resize(chunks_);
  {
    FillOptions fo;
    fo.copy_on_accept = false;  // a copy into the region is a publication: only whole bundles
    fo.max_fills = windows;
    fo.max_objects = std::max<uint32_t>(1, std::min<uint32_t>(windows, chunks_));
    fo.stats_mutex = &mu_;
    fill_ = std::make_unique<FillPath>(*plan_, *source_, static_cast<FillOwner&>(*this), fo);
  }
  bundles_.resize(windows);
  for (auto& b : bundles_) {
    b.chunks.reserve(windows);
  }
  cur_mark_.assign(chunks_, 0);
  ra_chunks_.reserve(windows);
  req_slots_.resize(windows);
  req_tags_.resize(windows);
  rejection_.bundle.reserve(windows);
}

Pager::~Pager() {
  try {
    shutdown();
  } catch (...) {
  }
  if (base_) {
    for_each_mapped_run(page_unmapped_, 0, page_unmapped_.size(), [&](uint64_t p, uint64_t q) {
      ::munmap(base_ + p * page_, (q - p) * page_);
    });
    if (mapped_bytes_ > registered_bytes_) ::munmap(base_ + registered_bytes_, mapped_bytes_ - registered_bytes_);
  }
  if (evfd_ >= 0) ::close(evfd_);
}

uint64_t Pager::chunk_length(ChunkId c) const {
  const uint64_t start = static_cast<uint64_t>(c) * cfg_.chunk_size;
  return std::min(cfg_.chunk_size, registered_bytes_ - start);
}

void Pager::start() {
  if (started_) return;
  // The uring engine signals completions on an eventfd the fault loop polls with the
  // userfaultfd; the blocking engines complete inside submit().
  cfd_ = source_->completion_fd();
  blocking_ = cfd_ < 0;
  started_ = true;
  thread_ = std::thread([this] { loop(); });
}

void Pager::finish_registration() {
  // PROT_NONE first, then unregister: unregistering wakes any thread still blocked in a
  // fault, and it must retry into a protection fault, never into a fresh zero page.
  // Only our own runs: a hole the application unmapped may hold someone else's mapping.
  for_each_mapped_run(page_unmapped_, 0, page_unmapped_.size(), [&](uint64_t p, uint64_t q) {
    ::mprotect(base_ + p * page_, (q - p) * page_, PROT_NONE);
  });
  for_each_mapped_run(page_unmapped_, 0, page_unmapped_.size(), [&](uint64_t p, uint64_t q) {
    uffdio_range r{reinterpret_cast<uintptr_t>(base_ + p * page_), (q - p) * page_};
    ::ioctl(uffd_.fd(), UFFDIO_UNREGISTER, &r);
  });
}

void Pager::shutdown(const std::function<void()>& quiesce) {
  if (shut_) return;
  shut_ = true;
  if (!started_) {
    std::lock_guard lk(mu_);
    plan_shutdown_ = plan_->shutdown();
    src_stats_ = source_->stats();
    closed_source_windows_free_ = source_->windows_free();
    alloc_done_ = true;
    finish_registration();
    return;
  }
  paused_ = false;
  stopping_ = true;  // from here the loop serves every fault it reads and prefetches nothing
  notify();
  std::exception_ptr quiesce_error;
  if (quiesce) {
    try {
      quiesce();
    } catch (...) {
      quiesce_error = std::current_exception();
    }
  }
  stopping_quiesced_ = true;  // the loop may now leave once nothing is pending
  notify();
  thread_.join();
  if (quiesce_error) std::rethrow_exception(quiesce_error);
}

void Pager::notify() {
  const uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(evfd_, &one, sizeof one);
}

// ---- driver-facing calls ------------------------------------------------------------

void Pager::enter(ChunkId c) {
  if (c >= chunks_) throw std::out_of_range("enter: chunk out of range");
  std::lock_guard lk(mu_);
  ++consumers_[c];
  plan_->hold(static_cast<int32_t>(c));  // ShutDown after the pager shut down: nothing to hold
  policy_->on_access(c);
  if (state_[c] != State::Absent && prefetched_unused_[c]) {
    prefetched_unused_[c] = 0;
    ++st_.prefetch_used;
  }
}

void Pager::leave(ChunkId c) {
  if (c >= chunks_) throw std::out_of_range("leave: chunk out of range");
  {
    std::lock_guard lk(mu_);
    if (consumers_[c] <= 0) throw std::logic_error("leave without enter on chunk " + std::to_string(c));
    --consumers_[c];
    plan_->unhold(static_cast<int32_t>(c));
  }
  if (want_leave_notify_.load(std::memory_order_relaxed)) notify();
}

void Pager::signal(uint64_t cursor) { step_boundary(cursor, UINT64_MAX); }

void Pager::set_readahead_horizon(uint64_t last_step) {
  std::lock_guard lk(mu_);
  readahead_horizon_ = last_step;
}

void Pager::set_step(uint64_t step) { step_boundary(std::nullopt, step); }

void Pager::set_step_oversize(bool oversize) {
  std::lock_guard lk(mu_);
  set_mode_locked(oversize);
  if (oversize) ++st_.oversize_steps;
}

void Pager::set_mode_locked(bool oversize) {
  clear_pins_locked();
  oversize_ = oversize;
  policy_->on_step_mode(oversize);
}

void Pager::clear_pins_locked() {
  for (const auto& [tid, c] : thread_pins_) {
    --pins_[c];
    plan_->unhold(static_cast<int32_t>(c));
  }
  thread_pins_.clear();
}

void Pager::pin_locked(uint32_t tid, ChunkId c) {
  // A thread's pins: the last kPinsPerThread distinct chunks it faulted on (it is blocked on
  // the newest, so it reads nothing else now). Two, because a thread can need two chunks at
  // once: a matrix-product tile reads several rows block by block, interleaved (llamafile's
  // tinyBLAS Q8_0 kernel: 4 rows per tile, 32 weights of each row in turn), and a tile whose
  // rows straddle a chunk boundary alternates between the two chunks; with one pin the
  // chunks evict each other on every block. thread_pins_ is ordered oldest first.
  size_t mine = 0, oldest_mine = SIZE_MAX;
  for (size_t i = 0; i < thread_pins_.size(); ++i) {
    if (thread_pins_[i].first != tid) continue;
    if (thread_pins_[i].second == c) {  // already pinned by this thread: now its newest
      auto e = thread_pins_[i];
      thread_pins_.erase(thread_pins_.begin() + static_cast<ptrdiff_t>(i));
      thread_pins_.push_back(e);
      return;
    }
    if (mine++ == 0) oldest_mine = i;
  }
  if (mine >= kPinsPerThread) {
    --pins_[thread_pins_[oldest_mine].second];
    plan_->unhold(static_cast<int32_t>(thread_pins_[oldest_mine].second));
    thread_pins_.erase(thread_pins_.begin() + static_cast<ptrdiff_t>(oldest_mine));
    ++st_.pin_moves;
  } else if (mine == 0 && cfg_.max_pins > 0) {
    // A new thread beyond --threads (unexpected): the least recently faulting thread's pins go.
    // (Counted in place: the fault path does not allocate.)
    auto first_of = [&](size_t i) {
      for (size_t k = 0; k < i; ++k)
        if (thread_pins_[k].first == thread_pins_[i].first) return false;
      return true;
    };
    size_t threads = 0;
    for (size_t i = 0; i < thread_pins_.size(); ++i) threads += first_of(i);
    if (threads >= cfg_.max_pins) {
      // The least recent thread is the one whose newest pin is oldest.
      uint32_t victim = thread_pins_.front().first;
      size_t victim_newest = SIZE_MAX;
      for (size_t j = 0; j < thread_pins_.size(); ++j) {
        if (!first_of(j)) continue;
        const uint32_t t = thread_pins_[j].first;
        size_t newest = 0;
        for (size_t i = 0; i < thread_pins_.size(); ++i)
          if (thread_pins_[i].first == t) newest = i;
        if (newest < victim_newest) {
          victim_newest = newest;
          victim = t;
        }
      }
      for (size_t i = thread_pins_.size(); i-- > 0;)
        if (thread_pins_[i].first == victim) {
          --pins_[thread_pins_[i].second];
          plan_->unhold(static_cast<int32_t>(thread_pins_[i].second));
          thread_pins_.erase(thread_pins_.begin() + static_cast<ptrdiff_t>(i));
        }
    }
  }
  thread_pins_.emplace_back(tid, c);
  ++pins_[c];
  plan_->hold(static_cast<int32_t>(c));
  st_.max_pins = std::max<uint64_t>(st_.max_pins, thread_pins_.size());
}

void Pager::step_boundary(std::optional<uint64_t> cursor, uint64_t next_step, bool oversize) {
  {
    std::lock_guard lk(mu_);
    if (cursor) {
      policy_->on_signal(*cursor);
      audit_.record(*cursor);
      ++st_.signals;
      if (trace_) {
        if (cfg_.step_chunks.empty()) {
          trace_->append(step_, static_cast<uint32_t>(*cursor % chunks_), TraceKind::Signal);
        } else {
          for (ChunkId c : cfg_.step_chunks[*cursor % cfg_.step_chunks.size()])
            trace_->append(step_, c, TraceKind::Signal);
        }
      }
    }
    if (next_step != UINT64_MAX) {
      step_ = next_step;
      set_mode_locked(oversize);
      if (oversize) ++st_.oversize_steps;
    }
  }
  // The prefetch horizon moved; a new step has a new read-ahead bundle.
  if ((cursor && cfg_.prefetch_depth > 0) || (cfg_.readahead && next_step != UINT64_MAX)) notify();
}

bool Pager::demand_filled_in(ChunkId c, uint64_t step) const {
  std::lock_guard lk(mu_);
  return c < chunks_ && last_demand_step_[c] == static_cast<int64_t>(step);
}

bool Pager::resident(ChunkId c) const {
  std::lock_guard lk(mu_);
  return c < chunks_ && state_[c] == State::Resident;
}

uint64_t Pager::fills_of(ChunkId c) const {
  std::lock_guard lk(mu_);
  return fills_.at(c);
}

std::string Pager::error() const {
  std::lock_guard lk(mu_);
  return error_;
}

void Pager::set_failure_callback(std::function<void()> cb) {
  std::lock_guard lk(mu_);
  on_failure_ = std::move(cb);
}

PagerStats Pager::stats() const {
  std::lock_guard lk(mu_);
  PagerStats s = st_;
  s.resident_chunks = resident_list_.size();
  s.signals_out_of_order = audit_.out_of_order();
  s.fault_count = fault_hist_.count();
  s.fault_p50_ns = fault_hist_.quantile(0.5);
  s.fault_p99_ns = fault_hist_.quantile(0.99);
  s.fault_max_ns = fault_hist_.max();
  s.fill_count = fill_hist_.count();
  s.fill_p50_ns = fill_hist_.quantile(0.5);
  s.fill_p99_ns = fill_hist_.quantile(0.99);
  s.fill_max_ns = fill_hist_.max();
  return s;
}

SourceStats Pager::source_stats() const {
  std::lock_guard lk(mu_);
  return src_stats_;
}

std::string Pager::first_mismatch() const {
  std::lock_guard lk(mu_);
  return first_mismatch_;
}

SignalAudit Pager::audit() const {
  std::lock_guard lk(mu_);
  return audit_;
}

std::vector<ChunkId> Pager::resident_set() const {
  std::lock_guard lk(mu_);
  auto v = resident_list_;
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<ChunkId> Pager::pinned_set() const {
  std::lock_guard lk(mu_);
  std::vector<ChunkId> v;
  for (ChunkId c = 0; c < chunks_; ++c)
    if (pins_[c] > 0) v.push_back(c);
  return v;
}

std::optional<uint64_t> Pager::region_huge_bytes() const {
  // /proc/self/smaps: sum AnonHugePages over the mappings that lie inside the region.
  std::ifstream in("/proc/self/smaps");
  if (!in) return std::nullopt;
  const auto lo = reinterpret_cast<uintptr_t>(base_), hi = lo + mapped_bytes_;
  std::string line;
  bool inside = false;
  uint64_t kb = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
        line.find(':') > line.find(' ')) {
      const uintptr_t a = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
      const uintptr_t b = std::stoull(line.substr(line.find('-') + 1, line.find(' ') - line.find('-') - 1), nullptr, 16);
      inside = a >= lo && b <= hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) kb += std::stoull(line.substr(14));
  }
  return kb * 1024;
}

void Pager::pause(bool on) {
  paused_ = on;
  notify();
}


uint64_t Pager::reconcile_now() {
  std::lock_guard lk(mu_);
  const uint64_t before = st_.reconcile_mismatches;
  reconcile_locked();
  return st_.reconcile_mismatches - before;
}

// ---- failure ------------------------------------------------------------------------

void Pager::fail(const std::string& why) {
  RejectionPathScope scope;
  std::function<void()> cb;
  {
    std::lock_guard lk(mu_);
    if (failed_) return;
    error_ = why;
    failed_ = true;
    failure_callback_due_ = false;
    cb = on_failure_;
  }
  if (cb) cb();
}

void Pager::run_due_failure_callback() {
  std::function<void()> cb;
  {
    std::lock_guard lk(mu_);
    if (!failure_callback_due_) return;
    failure_callback_due_ = false;
    cb = on_failure_;
  }
  RejectionPathScope scope;
  if (cb) cb();
}

std::optional<PlanError> Pager::plan_shutdown() const {
  std::lock_guard lk(mu_);
  return plan_shutdown_;
}

SourceReport Pager::source_report() const {
  std::lock_guard lk(mu_);
  SourceReport r;
  r.engine = source_->engine();
  r.windows = source_->window_count();
  r.depth = source_->max_inflight();
  r.alignment = source_->alignment();
  r.window_capacity = source_->window_capacity();
  r.stats = src_stats_;  // the pager thread's copy (the source itself is the pager thread's)
  const LatencyHistogram& reads = fill_->read_latency();  // written under mu_
  r.read_count = reads.count();
  r.read_p50_ns = reads.quantile(0.5);
  r.read_p99_ns = reads.quantile(0.99);
  r.read_max_ns = reads.max();
  const PlanBalance bal = plan_->balance();
  // Before the pager closed (a failed run that left threads in faults), the Plan's count.
  r.windows_free_at_close = alloc_done_ ? closed_source_windows_free_ : bal.windows_free;
  r.plan_windows_free_at_close = bal.windows_free;
  r.tickets_outstanding_at_close = bal.live_tickets;
  r.cancellations = cancellations_;
  r.alloc_counter_installed = alloc_hook_installed();
  const AllocCounts now = alloc_done_ ? alloc1_ : alloc_counts();
  r.dynamic_allocations = started_ ? now.read_path - alloc0_.read_path : 0;
  r.rejection_allocations = started_ ? now.rejection_path - alloc0_.rejection_path : 0;
  return r;
}

PagerRejectionReport Pager::rejection_report() const {
  std::lock_guard lk(mu_);
  return rejection_;
}

PlanError Pager::try_recycle(ChunkId c) {
  if (c >= chunks_) return PlanError::InvalidArgument;
  std::lock_guard lk(mu_);
  if (state_[c] != State::Resident) return PlanError::InvalidTransition;
  const PlanError e = plan_->recycle(static_cast<int32_t>(c));
  if (e != PlanError::None) {
    ++st_.plan_recycle_refusals;
    return e;
  }
  // The Plan agreed (no consumer, no pin): the eviction goes ahead, slot already recycled.
  const uint64_t p0 = first_page(c), np = pages_in(c);
  for_each_mapped_run(page_unmapped_, p0, p0 + np, [&](uint64_t p, uint64_t q) {
    ::madvise(base_ + p * page_, (q - p) * page_, MADV_DONTNEED);
  });
  mark_evicted_locked(c);
  return PlanError::None;
}

std::string Pager::evidence_locked() const {
  std::ostringstream os;
  os << "resident=[";
  auto rs = resident_list_;
  std::sort(rs.begin(), rs.end());
  for (size_t i = 0; i < rs.size(); ++i) os << (i ? "," : "") << rs[i];
  os << "] budget_chunks=" << cfg_.budget_chunks << " consumers={";
  bool first = true;
  for (ChunkId c = 0; c < chunks_; ++c)
    if (consumers_[c] > 0) {
      os << (first ? "" : ",") << c << ":" << consumers_[c];
      first = false;
    }
  os << "}";
  if (oversize_) {
    os << " oversize pins={";
    for (size_t i = 0; i < thread_pins_.size(); ++i)
      os << (i ? "," : "") << "tid " << thread_pins_[i].first << ":" << thread_pins_[i].second;
    os << "}";
  }
  return os.str();
}

void Pager::check_watchdog() {
  if (pending_.empty() || watchdog_reported_ || paused_) return;
  const uint64_t limit = static_cast<uint64_t>(cfg_.watchdog_s * 1e9);
  const uint64_t age = now_ns() - pending_.front().t_read_ns;
  if (age < limit) return;
  watchdog_reported_ = true;
  const ChunkId c = static_cast<ChunkId>((pending_.front().addr - reinterpret_cast<uintptr_t>(base_)) /
                                         cfg_.chunk_size);
  RejectionPathScope scope;
  std::string ev;
  bool reading = false;
  {
    std::lock_guard lk(mu_);
    ev = evidence_locked();
    reading = state_[c] == State::Filling;
  }
  if (reading) {
    fail("watchdog: fault on chunk " + std::to_string(c) + " not served within " + std::to_string(cfg_.watchdog_s) +
         " s: its read has been in the " + to_string(source_->engine()) + " source all that time (storage not "
         "answering); " + ev);
    return;
  }
  fail("watchdog: fault on chunk " + std::to_string(c) + " not served within " +
       std::to_string(cfg_.watchdog_s) + " s (no evictable chunk: every resident chunk has live "
       "consumers or a pin); " + ev);
}

void Pager::check_stall() {
  const int64_t c = fill_->busy_slot();  // slot c is chunk c
  if (c < 0 || failed_) return;
  const uint64_t since = fill_->busy_since_ns();
  const uint64_t now = now_ns();
  if (now <= since || now - since < static_cast<uint64_t>(cfg_.watchdog_s * 1e9)) return;
  if (fill_->busy_slot() != c || fill_->busy_since_ns() != since) return;  // moved on meanwhile
  RejectionPathScope scope;
  std::string ev;
  {
    std::lock_guard lk(mu_);
    ev = evidence_locked();
  }
  fail("watchdog: the fill of chunk " + std::to_string(c) + " has been in the " +
       to_string(source_->engine()) + " source for more than " + std::to_string(cfg_.watchdog_s) +
       " s (storage not answering); " + ev);
}

// ---- the fault loop -----------------------------------------------------------------

void Pager::loop() {
  // The fault loop is the read path: after start it must not allocate (alloc_count.hpp);
  // failure messages are built on the rejection path.
  ReadPathScope scope;
  {
    std::lock_guard lk(mu_);
    alloc0_ = alloc_counts();
  }
  for (;;) {
    read_messages();
    uint64_t drained;
    while (::read(evfd_, &drained, sizeof drained) > 0) {
    }
    if (cfd_ >= 0)
      while (::read(cfd_, &drained, sizeof drained) > 0) {
      }
    bool progressed = reap_completions();
    if (!paused_) {
      progressed |= publish_readahead();
      progressed |= serve_pending();
      progressed |= maybe_readahead();
      if (!progressed && pending_.empty() && !stopping_) progressed = maybe_prefetch();
      if (blocking_) progressed |= reap_completions();  // a blocking read completed in submit()
    }
    run_due_failure_callback();
    if (stopping_ && stopping_quiesced_ && !paused_ && (pending_.empty() || failed_) && (fill_->inflight() == 0 || failed_)) {
      // Final drain: anything that arrived after the last read is served before we leave.
      read_messages();
      if (pending_.empty() || failed_) break;
      continue;
    }
    check_watchdog();
    if (progressed) continue;
    // Block until a fault/event, a completion, a notification (leave, signal, shutdown), or
    // the next watchdog tick when a fault is waiting for room.
    const bool waiting = !pending_.empty() && !paused_;
    want_leave_notify_.store(waiting || cfg_.prefetch_depth > 0 || cfg_.readahead, std::memory_order_relaxed);
    pollfd fds[3] = {{uffd_.fd(), POLLIN, 0}, {evfd_, POLLIN, 0}, {cfd_, POLLIN, 0}};
    ::poll(fds, cfd_ >= 0 ? 3 : 2, waiting ? 20 : -1);
  }
  close_reads();
  {
    std::lock_guard lk(mu_);
    alloc1_ = alloc_counts();
    src_stats_ = source_->stats();
    closed_source_windows_free_ = source_->windows_free();
    alloc_done_ = true;
  }
  finish_registration();
}

void Pager::close_reads() {
  // A failed run may leave reads in flight and accepted reads waiting for their bundle: the
  // fill path drains the source, hands every completion to the Plan (nothing is copied or
  // published), gives the windows back, and abandons the tickets whose completion never
  // came. Then the Plan shuts down (refused while a consumer holds a slot).
  const uint32_t abandoned = fill_->close();
  std::lock_guard lk(mu_);
  cancellations_ += abandoned;
  for (BundleRun& b : bundles_) {
    if (!b.live) continue;
    for (ChunkId c : b.chunks)
      if (state_[c] == State::Filling) {
        state_[c] = State::Absent;
        if (b.roomed) --filling_;
      }
    b.live = false;
    b.ready = false;
  }
  readahead_ready_ = 0;
  plan_shutdown_ = plan_->shutdown();
}

void Pager::read_messages() {
  uffd_msg msgs[64];
  for (;;) {
    const ssize_t n = ::read(uffd_.fd(), msgs, sizeof msgs);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) fail("read from userfaultfd failed (" + errno_name(errno) + ")");
      return;
    }
    const uint64_t t = now_ns();
    const size_t count = static_cast<size_t>(n) / sizeof(uffd_msg);
    for (size_t i = 0; i < count; ++i) {
      const uffd_msg& m = msgs[i];
      if (m.event == UFFD_EVENT_PAGEFAULT) {
        const uintptr_t addr = static_cast<uintptr_t>(m.arg.pagefault.address) & ~(uintptr_t)(page_ - 1);
        {
          std::lock_guard lk(mu_);
          ++st_.faults_handled;
          const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
          if (oversize_ && addr >= b && addr < b + registered_bytes_)
            pin_locked(m.arg.pagefault.feat.ptid, static_cast<ChunkId>((addr - b) / cfg_.chunk_size));
        }
        pending_.push_back({addr, t, false});
      } else if (m.event == UFFD_EVENT_UNMAP) {
        handle_unmap(static_cast<uintptr_t>(m.arg.remove.start), static_cast<uintptr_t>(m.arg.remove.end));
      }
    }
    if (count < sizeof msgs / sizeof msgs[0]) return;
  }
}

void Pager::handle_unmap(uintptr_t start, uintptr_t end) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
  const uintptr_t lo = std::max(start, b);
  const uintptr_t hi = std::min(end, b + registered_bytes_);
  {
    std::lock_guard lk(mu_);
    ++st_.unmap_events;
    if (lo < hi) {
      for (uint64_t p = (lo - b) / page_; p < (hi - b + page_ - 1) / page_; ++p) {
        if (page_unmapped_[p]) continue;
        page_unmapped_[p] = 1;
        const ChunkId c = static_cast<ChunkId>(p / chunk_pages_);
        if (--mapped_pages_[c] == 0) {
          // The kernel freed whatever was there: drop the chunk from the books (not an
          // eviction: nothing was decided) and never COPY into it again. Its slot's version
          // is gone too (a chunk still being read is dropped when its bundle publishes).
          if (state_[c] == State::Resident) {
            remove_resident_locked(c);
            if (plan_->recycle(static_cast<int32_t>(c)) == PlanError::ConsumersLive) ++st_.plan_recycle_refusals;
            state_[c] = State::Absent;
          }
          ++st_.unmapped_chunks;
        }
      }
    }
  }
  // Faults queued for the hole: wake them so they retry (and die with SIGSEGV, as an
  // access to unmapped memory must), and forget them.
  std::erase_if(pending_, [&](const PendingFault& f) { return f.addr >= start && f.addr < end; });
  if (lo < hi) {
    uffdio_range r{lo, hi - lo};
    ::ioctl(uffd_.fd(), UFFDIO_WAKE, &r);
  }
}

void Pager::remove_resident_locked(ChunkId c) {
  auto it = std::find(resident_list_.begin(), resident_list_.end(), c);
  if (it != resident_list_.end()) {
    *it = resident_list_.back();
    resident_list_.pop_back();
  }
}

bool Pager::serve_pending() {
  const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
  bool progressed = false;
  for (size_t i = 0; i < pending_.size();) {
    const PendingFault f = pending_[i];
    if (f.addr < b || f.addr >= b + registered_bytes_) {  // not ours: let it retry
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    const ChunkId c = static_cast<ChunkId>((f.addr - b) / cfg_.chunk_size);
    int bi = -1;
    {
      std::lock_guard lk(mu_);
      if (page_unmapped_[(f.addr - b) / page_]) {
        // stale: the hole was woken when the unmap event was read
        pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
        progressed = true;
        continue;
      }
      if (state_[c] == State::Resident) {
        // Already published (another thread's fault or a read-ahead filled it): wake it.
        ++st_.spurious_faults;
        ++st_.waited_faults;
        pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
        const uint64_t t = now_ns();
        st_.exposed_wait_ns += t - f.t_read_ns;
        uffdio_range r{f.addr, page_};
        ::ioctl(uffd_.fd(), UFFDIO_WAKE, &r);
        progressed = true;
        continue;
      }
      // Filling: its read is in flight; the fault waits for it (never a second read).
      // Otherwise it waits for a window, for room (a leave), or its chunk's read was
      // rejected (the run has failed).
      if (state_[c] != State::Absent || poisoned_[c] || fail_closed_ || free_windows() == 0 || !make_room_locked(c)) {
        ++i;
        continue;
      }
      bi = begin_bundle_locked(FillKind::Demand, &c, 1);
      if (bi < 0) {
        ++i;
        continue;
      }
      prefetched_unused_[c] = 0;
      pending_[i].trigger = true;
    }
    fill_->issue();
    progressed = true;
    ++i;
    // A blocking read happened inside submit(): publish it before the next one, so the
    // userfaultfd's messages (events) are read in between.
    if (blocking_) break;
  }
  return progressed;
}

bool Pager::make_room_locked(ChunkId for_chunk) {
  auto evictable = [this, for_chunk](ChunkId v) {
    return v != for_chunk && consumers_[v] == 0 && pins_[v] == 0 && state_[v] == State::Resident;
  };
  if (policy_->evict_eagerly()) {
    // Keep nothing beyond need, except what was read ahead for a step still to come.
    auto eager = [this, for_chunk](ChunkId v) {
      return v != for_chunk && consumers_[v] == 0 && pins_[v] == 0 && state_[v] == State::Resident &&
             !prefetched_unused_[v];
    };
    while (auto v = policy_->choose_victim(resident_list_, eager))
      if (!evict_locked(*v)) return false;
  }
  // Demand and prefetch reads in flight hold their room already (read-ahead bundles take
  // theirs when they are published).
  while (resident_list_.size() + filling_ + 1 > cfg_.budget_chunks) {
    auto v = policy_->choose_victim(resident_list_, evictable);
    if (!v) return false;
    if (!evict_locked(*v)) return false;
  }
  return true;
}

// The books after a chunk's pages were discarded: absent, out of the resident set, traced.
void Pager::mark_evicted_locked(ChunkId c) {
  state_[c] = State::Absent;
  prefetched_unused_[c] = 0;
  remove_resident_locked(c);
  ++st_.evictions;
  if (trace_) trace_->append(step_, c, TraceKind::Eviction);
  if (cfg_.eager_reconcile) reconcile_locked();
}

bool Pager::evict_locked(ChunkId c) {
  // Under the lock, so no driver can enter the chunk between the choice and the discard.
  // The Plan recycles the chunk's slot first, and refuses a slot with a live consumer (or
  // pin): the pager's own rule, enforced by the Plan. A refusal here is a pager bug.
  if (const PlanError e = plan_->recycle(static_cast<int32_t>(c)); e != PlanError::None) {
    ++st_.plan_recycle_refusals;
    fail_closed_ = true;
    const uint32_t held = static_cast<uint32_t>(consumers_[c]) + pins_[c];
    fail_locked_with([&] {
      return "the Plan refused to recycle chunk " + std::to_string(c) + " (" + to_string(e) + ", " +
             std::to_string(held) + " consumer(s) and pin(s) in the pager's books)";
    });
    return false;
  }
  const uint64_t p0 = first_page(c), np = pages_in(c);
  for (uint64_t p = p0; p < p0 + np;) {
    if (page_unmapped_[p]) {
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < p0 + np && !page_unmapped_[q]) ++q;
    // Cannot fail on a mapped range; a concurrent unmap only removes pages sooner.
    ::madvise(base_ + p * page_, (q - p) * page_, MADV_DONTNEED);
    p = q;
  }
  mark_evicted_locked(c);
  return true;
}

// ---- the fill machinery: every fill is a bundle of the Plan, moved by the fill path ------

uint32_t Pager::free_windows() const {
  const size_t depth = source_->max_inflight(), inflight = fill_->inflight();
  const size_t room = inflight >= depth ? 0 : depth - inflight;
  return static_cast<uint32_t>(std::min(source_->windows_free(), room));
}

int Pager::begin_bundle_locked(FillKind kind, const ChunkId* cs, uint32_t n) {
  // The chunks are Absent and room was made for them: they become Filling, their slots
  // LOADING (one request: one bundle, published all-or-nothing).
  PlanResult<BundleHandle> r{};
  if (n <= req_slots_.size()) {
    for (uint32_t k = 0; k < n; ++k) {
      req_slots_[k] = static_cast<int32_t>(cs[k]);
      req_tags_[k] = cs[k];
    }
    r = plan_->request_slots(req_slots_.data(), cs, req_tags_.data(), n);
  } else {
    r.error = PlanError::InvalidArgument;
  }
  if (!r.ok()) {
    const PlanError e = r.error;
    fail_locked_with([&] { return std::string("internal: the Plan refused the slots of chunk ") + std::to_string(cs[0]) +
                           " (" + to_string(e) + ")"; });
    return -1;
  }
  const int fi = fill_->track(r.value, cs, n);  // one chunk = one object of the Plan
  if (fi < 0) {
    fail_locked_with([] { return std::string("internal: no free fill record"); });
    return -1;
  }
  BundleRun& b = bundles_[static_cast<size_t>(fi)];
  b.live = true;
  b.kind = kind;
  b.n = n;
  b.ready = false;
  b.roomed = kind != FillKind::Readahead;
  b.target = 0;
  b.chunks.assign(cs, cs + n);
  for (uint32_t k = 0; k < n; ++k) state_[cs[k]] = State::Filling;
  // Demand and prefetch reads take their room now; a read-ahead bundle waits in its windows
  // (paid from the budget) and takes room when it is published.
  if (kind != FillKind::Readahead) filling_ += n;
  return fi;
}

bool Pager::reap_completions() {
  if (fill_->inflight() == 0) return false;
  const uint32_t n = fill_->reap(false);
  if (n > 0) snapshot_source_stats();
  return n > 0;
}

// ---- FillOwner: what the fill path asks of the pager ----------------------------------

bool Pager::copy(uint32_t, const CopyOrder& order, const Completion& c, uint64_t submit_ns) {
  const ChunkId ch = manifest_->piece(order.piece).object;  // one object per chunk
  const uint64_t len = chunk_length(ch), got = c.extent.length;
  // The tail chunk publishes whole pages: zero the window's bytes past the file end.
  if (len > got) std::memset(c.data + got, 0, len - got);
  if (!publish(ch, c.data, got)) return false;
  std::lock_guard lk(mu_);
  fill_hist_.record(now_ns() - submit_ns);  // the read and the copy
  return true;
}

void Pager::snapshot_source_stats() {
  std::lock_guard lk(mu_);
  src_stats_ = source_->stats();  // copied, so readers never race the pager thread
}

void Pager::on_landed(uint32_t fi) {
  snapshot_source_stats();  // before the wake: a woken thread sees its fill in the stats
  BundleRun& b = bundles_[fi];
  if (b.kind == FillKind::Readahead) {
    b.ready = true;  // HOST_READY in its windows until its step begins
    ++readahead_ready_;
    publish_readahead();
    return;
  }
  publish_bundle(b, fi);
}

void Pager::on_rejected(uint32_t fi, PlanError kind, const Completion& c) {
  // A fatal rejection: the run fails closed (no further read, copy or publication), and
  // nothing of this bundle is ever copied.
  snapshot_source_stats();
  BundleRun& b = bundles_[fi];
  fail_closed_ = true;
  fill_->fail_closed();
  const RejectionRecord rej = plan_->first_rejection();
  const ChunkId chunk = rej.kind == kind && rej.slot >= 0 ? static_cast<ChunkId>(rej.slot) : b.chunks[0];
  {
    std::lock_guard lk(mu_);
    if (!rejection_.any) {
      rejection_ = PagerRejectionReport{true, kind, step_, b.chunks, 0};
      rejected_bundle_ = static_cast<int>(fi);
    }
  }
  fail_with([&] {
    std::string m = std::string("rejected ") + to_string(kind) + " completion for chunk " + std::to_string(chunk) +
                    " (window " + std::to_string(c.window) + ", generation " +
                    std::to_string(rej.kind == kind ? rej.generation : 0) + ", epoch " +
                    std::to_string(rej.kind == kind ? rej.epoch : 0) + ")";
    if (!c.error.empty()) m += ": " + c.error;
    m += "; nothing of its bundle (" + std::to_string(b.n) + " chunk(s):";
    for (ChunkId x : b.chunks) m += ' ' + std::to_string(x);
    return m + ") was published";
  });
}

void Pager::on_dropped(uint32_t fi) { drop_bundle(bundles_[fi]); }

void Pager::on_internal(uint32_t fi, const char* what, PlanError e) {
  const ChunkId c = fi < bundles_.size() && !bundles_[fi].chunks.empty() ? bundles_[fi].chunks[0] : 0;
  fail_with([&] {
    return std::string("internal: ") + what + (fi < bundles_.size() ? " (bundle of chunk " + std::to_string(c) + ")" : "") +
           (e == PlanError::None ? "" : std::string(": ") + to_string(e));
  });
}

// ---- publication -------------------------------------------------------------------------

void Pager::publish_bundle(BundleRun& b, uint32_t fi) {
  // Every read of the bundle was accepted: copy (or move) each into the region, then publish
  // the bundle in one Plan transition, book it and wake the waiters.
  if (!fill_->land(fi)) {
    fill_->forget(fi);  // the rest is not copied; the Plan abandons its tickets at close
    drop_bundle(b);
    return;
  }
  std::unique_lock lk(mu_);
  if (const PlanError e = fill_->publish(fi); e != PlanError::None) {
    lk.unlock();
    fail_with([&] { return "internal: the Plan refused to publish the bundle of chunk " + std::to_string(b.chunks[0]) +
                           " (" + to_string(e) + ")"; });
    fill_->forget(fi);
    drop_bundle(b);
    return;
  }
  for (ChunkId c : b.chunks) book_fill_locked(c, b.kind);
  st_.max_resident_chunks = std::max<uint64_t>(st_.max_resident_chunks, resident_list_.size());
  ++st_.bundles_published;
  if (b.kind == FillKind::Readahead) ++st_.readahead_bundles;
  if (static_cast<int>(fi) == rejected_bundle_) rejection_.bundle_chunks_published += b.n;
  if (cfg_.eager_reconcile) reconcile_locked();
  // The waiters' accounting; the wakes follow (DONTWAKE above: a woken thread finds the
  // fill in the books).
  const uint64_t t = now_ns();
  for (ChunkId c : b.chunks)
    if (state_[c] == State::Resident) wake_waiters_locked(c, t, b.kind);
  b.live = false;
  lk.unlock();
  for (ChunkId c : b.chunks) {
    if (mapped_pages_[c] == 0) continue;
    wake_chunk(c);
    maybe_collapse(c);
  }
}

// A published chunk in the pager's books: resident (or, unmapped meanwhile, gone at once),
// counted, traced, and told to the policy.
void Pager::book_fill_locked(ChunkId c, FillKind kind) {
  --filling_;
  ++fills_[c];
  if (kind == FillKind::Demand) {
    ++st_.demand_fills;
    if (last_demand_step_[c] == static_cast<int64_t>(step_)) ++st_.in_step_refills;
    last_demand_step_[c] = static_cast<int64_t>(step_);
    if (trace_) trace_->append(step_, c, TraceKind::DemandFill);
  } else {
    ++st_.prefetch_fills;
    if (kind == FillKind::Readahead) ++st_.readahead_fills;
    if (trace_) trace_->append(step_, c, TraceKind::PrefetchFill);
  }
  if (mapped_pages_[c] == 0) {
    // Unmapped while we read it: nothing to keep (its slot's version goes at once).
    state_[c] = State::Absent;
    prefetched_unused_[c] = 0;
    if (plan_->recycle(static_cast<int32_t>(c)) == PlanError::ConsumersLive) ++st_.plan_recycle_refusals;
    return;
  }
  state_[c] = State::Resident;
  resident_list_.push_back(c);
  // A demand fill is an access; so is a read-ahead fill (for LRU: the access it stands in
  // for is one step away). Arm E's prefetch is not.
  if (kind != FillKind::Prefetch) policy_->on_access(c);
  policy_->on_fill(c);
}

void Pager::drop_bundle(BundleRun& b) {
  // A failed bundle: its chunks go back to Absent, poisoned (a rejected read is not retried:
  // the run has failed), their faults stay unserved.
  std::lock_guard lk(mu_);
  const bool counted = b.kind != FillKind::Readahead || b.roomed;
  for (ChunkId c : b.chunks) {
    if (state_[c] == State::Filling) {
      state_[c] = State::Absent;
      if (counted) --filling_;
    }
    prefetched_unused_[c] = 0;
    poisoned_[c] = 1;
  }
  if (b.ready) --readahead_ready_;
  b.ready = false;
  b.live = false;
}

void Pager::wake_waiters_locked(ChunkId c, uint64_t t, FillKind kind) {
  // Every fault message on chunk c is a compute thread blocked on it: its wait is exposed.
  const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
  bool first = true;
  for (size_t i = 0; i < pending_.size();) {
    const PendingFault& f = pending_[i];
    if (f.addr < b || f.addr >= b + registered_bytes_ || (f.addr - b) / cfg_.chunk_size != c) {
      ++i;
      continue;
    }
    const uint64_t w = t > f.t_read_ns ? t - f.t_read_ns : 0;
    st_.exposed_wait_ns += w;
    ++st_.waited_faults;
    if (f.trigger) {
      fault_hist_.record(w);  // the demand fault that read the chunk
    } else if (kind != FillKind::Demand && first) {
      fault_hist_.record(w);  // the first fault that waited for a read-ahead (or prefetch) in flight
      ++st_.readahead_waits;
      first = false;
    } else {
      ++st_.spurious_faults;  // another thread (or page) of a chunk being filled: woken, not refilled
    }
    pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
  }
}

std::span<const ChunkId> Pager::step_chunks_of(uint64_t step) {
  if (!cfg_.step_chunks.empty()) return cfg_.step_chunks[step % cfg_.step_chunks.size()];
  one_chunk_ = static_cast<ChunkId>(step % chunks_);
  return {&one_chunk_, 1};
}

std::span<const ChunkId> Pager::readahead_chunks_of(uint64_t step) {
  if (!cfg_.readahead_steps.empty()) return cfg_.readahead_steps[step % cfg_.readahead_steps.size()];
  return step_chunks_of(step);
}

bool Pager::maybe_readahead() {
  if (!cfg_.readahead || fail_closed_ || failed_ || stopping_ || paused_) return false;
  // At most windows - 1 windows for read-ahead: one stays free for demand reads.
  const uint32_t windows = static_cast<uint32_t>(source_->window_count());
  const uint32_t cap = windows > 1 ? windows - 1 : 0;
  const uint32_t held = readahead_windows();
  if (held >= cap) return false;
  const uint32_t avail = std::min(free_windows(), cap - held);
  if (avail == 0) return false;
  int bi = -1;
  uint64_t target = 0;
  {
    std::lock_guard lk(mu_);
    target = step_ + 1;
    if (ra_done_step_ == target || target > readahead_horizon_) return false;
    // The chunks of step s+1 that are absent and not of step s (a chunk shared by both is
    // being read in step s: its fault reads it). They are read into windows now and wait
    // there (HOST_READY): no room is taken until step s+1 begins (publish_readahead).
    ++cur_stamp_;
    for (ChunkId c : step_chunks_of(step_)) cur_mark_[c] = cur_stamp_;
    ra_chunks_.clear();
    bool covered = true;
    for (ChunkId c : readahead_chunks_of(target)) {
      if (state_[c] != State::Absent || mapped_pages_[c] == 0 || poisoned_[c] || cur_mark_[c] == cur_stamp_) continue;
      if (ra_chunks_.size() == avail) {
        covered = false;
        break;
      }
      ra_chunks_.push_back(c);
    }
    if (covered) ra_done_step_ = target;
    if (ra_chunks_.empty()) return false;
    bi = begin_bundle_locked(FillKind::Readahead, ra_chunks_.data(), static_cast<uint32_t>(ra_chunks_.size()));
    if (bi < 0) return false;
    bundles_[static_cast<size_t>(bi)].target = target;
    for (ChunkId c : ra_chunks_) prefetched_unused_[c] = 1;
  }
  fill_->issue();
  return true;
}

// Windows held by read-ahead bundles (issued, not yet released).
uint32_t Pager::readahead_windows() const {
  uint32_t n = 0;
  for (size_t i = 0; i < bundles_.size(); ++i)
    if (bundles_[i].live && bundles_[i].kind == FillKind::Readahead) n += fill_->windows_held(static_cast<uint32_t>(i));
  return n;
}

bool Pager::publish_readahead() {
  // A read-ahead bundle whose reads all landed is published when its step has begun (or a
  // fault waits on one of its chunks: an access the declared steps did not foresee must
  // not wait for the step), with room made the way that step's demand faults would make it:
  // the policy's victims among chunks without consumers or pins, at the same cursor.
  if (fail_closed_ || readahead_ready_ == 0) return false;
  bool any = false;
  const uintptr_t base = reinterpret_cast<uintptr_t>(base_);
  for (BundleRun& b : bundles_) {
    const uint32_t fi = static_cast<uint32_t>(&b - bundles_.data());
    if (!b.live || b.kind != FillKind::Readahead || !b.ready || fill_->failed(fi)) continue;
    bool due;
    {
      std::lock_guard lk(mu_);
      // Its step has begun and the step before has let go of its chunks (the adapter enters
      // the new step's chunks before it leaves the old ones): D's demand faults in that step
      // come after the leave too, so the victims are the same. At shutdown: published (and
      // then discarded), not abandoned.
      due = stopping_;
      if (!due && step_ >= b.target) {
        due = true;
        ++cur_stamp_;  // a chunk of both steps stays held by the new one
        for (ChunkId c : step_chunks_of(b.target)) cur_mark_[c] = cur_stamp_;
        for (ChunkId c : step_chunks_of(b.target - 1))
          if (consumers_[c] > 0 && cur_mark_[c] != cur_stamp_) {
            due = step_ > b.target;  // still held: wait for the leave (unless a later step began)
            break;
          }
      }
      for (size_t i = 0; !due && i < pending_.size(); ++i) {
        const uintptr_t a = pending_[i].addr;
        if (a < base || a >= base + registered_bytes_) continue;
        const ChunkId c = static_cast<ChunkId>((a - base) / cfg_.chunk_size);
        due = std::find(b.chunks.begin(), b.chunks.end(), c) != b.chunks.end();
      }
      if (!due) continue;
      // Room for the whole bundle, or none taken (all-or-nothing).
      const uint32_t n = b.n;
      bool room = true;
      auto evictable = [this](ChunkId v) {
        return consumers_[v] == 0 && pins_[v] == 0 && state_[v] == State::Resident && !prefetched_unused_[v];
      };
      auto any_evictable = [this](ChunkId v) {
        return consumers_[v] == 0 && pins_[v] == 0 && state_[v] == State::Resident;
      };
      while (resident_list_.size() + filling_ + n > cfg_.budget_chunks) {
        auto v = policy_->choose_victim(resident_list_, evictable);
        if (!v) v = policy_->choose_victim(resident_list_, any_evictable);
        if (!v || !evict_locked(*v)) {
          room = false;
          break;
        }
      }
      if (!room) {
        ++st_.readahead_no_room;  // waits for a leave (progress: the step fits)
        continue;
      }
      filling_ += n;  // the room is theirs from here (publish_bundle books it)
      b.roomed = true;
    }
    b.ready = false;
    --readahead_ready_;
    publish_bundle(b, fi);
    any = true;
  }
  return any;
}

bool Pager::publish(ChunkId c, const std::byte* data, uint64_t data_len) {
  uint64_t from = 0;
  // `move`: a whole chunk (every page mapped, the full chunk size), read to a 2 MiB-aligned
  // address (the start of a window), is moved in; its pages leave the window, which the
  // source refaults on its next read. Anything else, or a failed move, is copied.
  if (cfg_.huge == HugeChunks::Move && data_len == cfg_.chunk_size && chunk_length(c) == cfg_.chunk_size &&
      mapped_pages_[c] == chunk_pages_ && reinterpret_cast<uintptr_t>(data) % kHugePage == 0) {
    uffdio_move mv{};
    mv.dst = reinterpret_cast<uintptr_t>(base_ + first_page(c) * page_);
    mv.src = reinterpret_cast<uintptr_t>(data);
    mv.len = cfg_.chunk_size;
    mv.mode = UFFDIO_MOVE_MODE_DONTWAKE;  // woken after booking, as for COPY
    if (::ioctl(uffd_.fd(), UFFDIO_MOVE, &mv) == 0) {
      std::lock_guard lk(mu_);
      ++st_.move_fills;
      return true;
    }
    const int e = errno;
    {
      std::lock_guard lk(mu_);
      ++st_.move_fallbacks;
      if (!st_.move_first_errno) st_.move_first_errno = e;
    }
    // What was moved is in place (whole pages); copy the rest from the window.
    if (mv.move > 0) from = static_cast<uint64_t>(mv.move) / page_;
  }
  return copy_pages(c, data, from);
}

void Pager::maybe_collapse(ChunkId c) {
  // `collapse`: the pager thread is the only one that evicts, so the chunk cannot go away
  // under the collapse; a concurrent unmap only makes it fail. The transient extra huge page
  // is paid by the chunk the caller reserved.
  if (cfg_.huge != HugeChunks::Collapse || chunk_length(c) != cfg_.chunk_size || mapped_pages_[c] != chunk_pages_)
    return;
  const int rc = ::madvise(base_ + first_page(c) * page_, cfg_.chunk_size, MADV_COLLAPSE);
  const int e = errno;
  std::lock_guard lk(mu_);
  if (rc == 0) {
    ++st_.collapses;
  } else {
    ++st_.collapse_failures;
    if (!st_.collapse_first_errno) st_.collapse_first_errno = e;
  }
  if (cfg_.eager_reconcile) reconcile_locked();
}

bool Pager::copy_pages(ChunkId c, const std::byte* data, uint64_t from_page) {
  const uint64_t p0 = first_page(c), np = pages_in(c);
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(cfg_.watchdog_s * 1e9);
  uint64_t p = p0 + from_page;
  while (p < p0 + np) {
    if (page_unmapped_[p]) {  // a hole the application made: never COPY there
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < p0 + np && !page_unmapped_[q]) ++q;
    uffdio_copy cp{};
    cp.dst = reinterpret_cast<uintptr_t>(base_ + p * page_);
    cp.src = reinterpret_cast<uintptr_t>(data + (p - p0) * page_);
    cp.len = (q - p) * page_;
    // DONTWAKE: waiters wake only after the books say "resident" (see wake_chunk), so a
    // driver that finishes the chunk can never observe a fill the books do not show yet.
    cp.mode = UFFDIO_COPY_MODE_DONTWAKE;
    if (::ioctl(uffd_.fd(), UFFDIO_COPY, &cp) == 0) {
      p = q;
      continue;
    }
    const int e = errno;
    if (cp.copy > 0) p += static_cast<uint64_t>(cp.copy) / page_;  // partial progress
    if (e == EAGAIN || e == ENOENT || e == EFAULT) {
      // The address space is changing (an unmap event is queued, or the range vanished):
      // read the events, which mark holes, then continue with what is still mapped.
      {
        std::lock_guard lk(mu_);
        ++st_.copy_retries;
      }
      read_messages();
      if (now_ns() > deadline) {
        fail("UFFDIO_COPY for chunk " + std::to_string(c) + " kept failing (" + errno_name(e) + ")");
        return false;
      }
      if (e == EAGAIN) sched_yield();
      continue;
    }
    fail("UFFDIO_COPY for chunk " + std::to_string(c) + " failed (" + errno_name(e) + ")");
    return false;
  }
  return true;
}

void Pager::wake_chunk(ChunkId c) {
  const uint64_t p0 = first_page(c);
  for_each_mapped_run(page_unmapped_, p0, p0 + pages_in(c), [&](uint64_t p, uint64_t q) {
    uffdio_range r{reinterpret_cast<uintptr_t>(base_ + p * page_), (q - p) * page_};
    ::ioctl(uffd_.fd(), UFFDIO_WAKE, &r);
  });
}

bool Pager::maybe_prefetch() {
  if (cfg_.prefetch_depth == 0 || failed_ || free_windows() == 0) return false;
  ChunkId chosen = 0;
  bool found = false;
  int bi = -1;
  {
    std::lock_guard lk(mu_);
    const auto cur = policy_->cursor();
    candidates_ = policy_->prefetch_candidates(cur ? *cur : kNoCursor, cfg_.prefetch_depth);
    for (ChunkId c : candidates_) {
      // Skip what is there or on its way, what a driver is about to demand (its fault will
      // come), and holes.
      if (state_[c] != State::Absent || consumers_[c] > 0 || mapped_pages_[c] == 0 || poisoned_[c])
        continue;
      if (resident_list_.size() + filling_ < cfg_.budget_chunks) {
        chosen = c;
        found = true;
      } else {
        auto v = policy_->choose_victim(resident_list_, [this](ChunkId x) {
          return consumers_[x] == 0 && pins_[x] == 0 && state_[x] == State::Resident;
        });
        // Displace only a chunk needed later than the candidate: prefetch never makes the
        // next demand worse than no prefetch.
        if (v && policy_->next_use(*v) > policy_->next_use(c) && evict_locked(*v)) {
          chosen = c;
          found = true;
        }
      }
      break;  // candidates are nearest first: if this one cannot go in, none farther can
    }
    if (!found) return false;
    bi = begin_bundle_locked(FillKind::Prefetch, &chosen, 1);
    if (bi < 0) return false;
    prefetched_unused_[chosen] = 1;
  }
  fill_->issue();
  return true;
}

void Pager::reconcile_locked() {
  // Kernel residency per mapped run of pages, then per chunk: a resident chunk must have
  // every mapped page present, an absent one none.
  const uint64_t total = registered_bytes_ / page_;
  std::vector<uint8_t>& known = mincore_known_;
  known.assign(total, 0);
  for (uint64_t p = 0; p < total;) {
    if (page_unmapped_[p]) {
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < total && !page_unmapped_[q]) ++q;
    if (::mincore(base_ + p * page_, (q - p) * page_, mincore_buf_.data() + p) == 0)
      std::fill(known.begin() + static_cast<ptrdiff_t>(p), known.begin() + static_cast<ptrdiff_t>(q), 1);
    // ENOMEM: being unmapped right now (event not read yet); those chunks are skipped.
    p = q;
  }
  ++st_.reconcile_checks;
  uint64_t present_total = 0;
  for (ChunkId c = 0; c < chunks_; ++c) {
    if (mapped_pages_[c] == 0) continue;
    const uint64_t p0 = first_page(c), np = pages_in(c);
    uint64_t present = 0, mapped = 0;
    bool skip = false;
    for (uint64_t p = p0; p < p0 + np; ++p) {
      if (page_unmapped_[p]) continue;
      if (!known[p]) {
        skip = true;
        break;
      }
      ++mapped;
      present += mincore_buf_[p] & 1;
    }
    if (skip || state_[c] == State::Filling) continue;  // mid-publish: neither answer is wrong
    present_total += present;
    const bool ok = state_[c] == State::Resident ? present == mapped : present == 0;
    if (!ok) {
      ++st_.reconcile_mismatches;
      RejectionPathScope scope;
      if (first_mismatch_.empty())
        first_mismatch_ = "chunk " + std::to_string(c) + " is " +
                          (state_[c] == State::Resident ? "resident" : "absent") +
                          " in the books but the kernel has " + std::to_string(present) + "/" +
                          std::to_string(mapped) + " pages present";
    }
  }
  st_.max_present_pages = std::max(st_.max_present_pages, present_total);

  // The books against the Plan: a chunk's state is its slot's phase (Absent: VACANT,
  // Filling: LOADING, Resident: published), and its consumers and pins are the slot's live
  // consumers (a resident chunk with one is IN_USE). Not once the run failed (a failed
  // bundle's slots are vacated before its chunks leave the books).
  if (failed_ || plan_shutdown_) return;  // after the Plan's shutdown every slot is VACANT
  plan_->slot_states(plan_phase_.data(), plan_consumers_.data());
  for (ChunkId c = 0; c < chunks_; ++c) {
    const SlotPhase ph = plan_phase_[c];
    const uint32_t held = static_cast<uint32_t>(consumers_[c]) + pins_[c];
    bool ok;
    switch (state_[c]) {
      case State::Absent: ok = ph == SlotPhase::Vacant; break;
      case State::Filling: ok = ph == SlotPhase::Loading; break;
      case State::Resident:
        ok = held > 0 ? ph == SlotPhase::InUse : (ph == SlotPhase::DeviceReady || ph == SlotPhase::Recyclable);
        break;
      default: ok = false;
    }
    ok = ok && held == plan_consumers_[c];
    if (ok) continue;
    ++st_.reconcile_mismatches;
    if (first_mismatch_.empty()) {
      RejectionPathScope scope;
      first_mismatch_ = "chunk " + std::to_string(c) + " is " +
                        (state_[c] == State::Resident ? "resident" : state_[c] == State::Filling ? "filling" : "absent") +
                        " with " + std::to_string(held) + " consumer(s)/pin(s) in the books but its Plan slot is " +
                        to_string(ph) + " with " + std::to_string(plan_consumers_[c]) + " consumer(s)";
    }
  }
}

}  // namespace resid
