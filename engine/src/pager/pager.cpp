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

#include "pager/pager_internal.hpp"

namespace resid {

Pager::Pager(std::unique_ptr<Source> source, std::unique_ptr<Policy> policy, PagerConfig cfg,
             Trace* trace)
    : cfg_(cfg),
      source_(std::move(source)),
      policy_(std::move(policy)),
      trace_(trace),
      audit_(0) {
  init_geometry();
  build_chunk_manifest();
  check_huge_support();
  open_userfaultfd();
  map_region();
  register_region();
  init_books();
  init_plan();
}

// The chunks of the file, checked (InputError for what a caller can get wrong).
void Pager::init_geometry() {
  page_ = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (!source_ || !policy_) throw std::invalid_argument("pager needs a source and a policy");
  if (cfg_.chunk_size == 0 || cfg_.chunk_size % page_ != 0)
    throw InputError("chunk size " + std::to_string(cfg_.chunk_size) +
                     " is not a positive multiple of the page size (" + std::to_string(page_) + ")");
  if (cfg_.budget_chunks == 0) throw InputError("pager budget must be at least one chunk");
  if (cfg_.defer_ahead_faults && !cfg_.step_chunks.empty())
    throw std::invalid_argument("defer_ahead_faults needs chunk steps (a fault's step is known only there)");
  if (source_->window_capacity() < cfg_.chunk_size)
    throw std::invalid_argument("source window smaller than a chunk");
  file_bytes_ = source_->file_size();
  if (file_bytes_ == 0) throw InputError("region file is empty");
  const uint64_t n = (file_bytes_ + cfg_.chunk_size - 1) / cfg_.chunk_size;
  if (n > UINT32_MAX) throw InputError("too many chunks");
  chunks_ = static_cast<uint32_t>(n);
  if (!cfg_.chunk_digests.empty() && cfg_.chunk_digests.size() != chunks_)
    throw InputError("content digests for " + std::to_string(cfg_.chunk_digests.size()) + " chunks, the file has " +
                     std::to_string(chunks_));
  chunk_pages_ = cfg_.chunk_size / page_;
  registered_bytes_ = (file_bytes_ + page_ - 1) / page_ * page_;
  mapped_bytes_ = n * cfg_.chunk_size;

}

void Pager::build_chunk_manifest() {
  // The Plan's manifest: one object per chunk, its file extent (the tail chunk is short).
  std::vector<PlanObjectSpec> specs(chunks_);
  for (ChunkId c = 0; c < chunks_; ++c) {
    const uint64_t off = static_cast<uint64_t>(c) * cfg_.chunk_size;
    specs[c].name = "chunk." + std::to_string(c);
    specs[c].extents.push_back({off, std::min(cfg_.chunk_size, file_bytes_ - off)});
  }
  manifest_ = std::make_unique<PlanManifest>(
    PlanManifest::build(std::move(specs), file_bytes_, source_->alignment(), source_->window_capacity()));
}

void Pager::check_huge_support() const {
  if (cfg_.protect && cfg_.huge == HugeChunks::Move)
    throw InputError("--protect: UFFDIO_MOVE cannot move into an mlocked region; use --huge-chunks off or collapse");
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
}

void Pager::open_userfaultfd() {
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

}

// The pager's books, sized once: the fault loop never allocates.
void Pager::init_books() {
  books_.init(chunks_, chunk_pages_, registered_bytes_ / page_);
  pins_.reserve(cfg_.max_pins);
  audit_ = cfg_.step_chunks.empty() ? SignalAudit(chunks_) : SignalAudit(chunks_, cfg_.step_chunks);
  pending_.reserve(1024);
  candidates_.reserve(64);

}

// The Plan's mutable half (the source's windows, one slot per chunk at its stable address)
// and the fill path over it.
void Pager::init_plan() {
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
  {
    FillOptions fo;
    fo.copy_on_accept = false;  // a copy into the region is a publication: only whole bundles
    fo.max_fills = windows;
    fo.max_objects = std::max<uint32_t>(1, std::min<uint32_t>(windows, chunks_));
    fo.stats_mutex = &mu_;
    fo.piece_digests = cfg_.chunk_digests.empty() ? nullptr : &cfg_.chunk_digests;  // one piece per chunk
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
    for_each_mapped_run(books_.holes(), 0, books_.holes().size(), [&](uint64_t p, uint64_t q) {
      ::munmap(base_ + p * page_, (q - p) * page_);
    });
    if (mapped_bytes_ > registered_bytes_) ::munmap(base_ + registered_bytes_, mapped_bytes_ - registered_bytes_);
    if (cfg_.protect) ::munlockall();
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
  ++books_[c].consumers;
  plan_->hold(static_cast<int32_t>(c));  // ShutDown after the pager shut down: nothing to hold
  policy_->on_access(c);
  if (books_[c].state != ChunkState::Absent && books_[c].prefetched_unused) {
    books_[c].prefetched_unused = 0;
    ++st_.prefetch_used;
  }
}

void Pager::leave(ChunkId c) { leave_impl(c, false); }

void Pager::leave_consumed(ChunkId c) { leave_impl(c, true); }

void Pager::leave_impl(ChunkId c, bool consumed) {
  if (c >= chunks_) throw std::out_of_range("leave: chunk out of range");
  {
    std::lock_guard lk(mu_);
    if (books_[c].consumers <= 0) throw std::logic_error("leave without enter on chunk " + std::to_string(c));
    --books_[c].consumers;
    plan_->unhold(static_cast<int32_t>(c));
    if (consumed) {
      policy_->on_consumed(c);
      ++st_.consumed_early;
    }
  }
  if (want_leave_notify_.load(std::memory_order_relaxed)) notify();
}

void Pager::signal(uint64_t cursor) { step_boundary(cursor, UINT64_MAX); }

void Pager::set_readahead_horizon(uint64_t last_step) {
  std::lock_guard lk(mu_);
  readahead_last_step_ = last_step;
}

void Pager::set_step(uint64_t step) { step_boundary(std::nullopt, step); }

void Pager::set_step_oversize(bool oversize) {
  std::lock_guard lk(mu_);
  set_mode_locked(oversize);
  if (oversize) ++st_.oversize_steps;
}

void Pager::set_loading() {
  std::lock_guard lk(mu_);
  set_mode_locked(true);
}




void Pager::step_boundary(std::optional<uint64_t> cursor, uint64_t next_step, bool oversize) {
  {
    std::lock_guard lk(mu_);
    if (cursor) {
      policy_->on_signal(*cursor);
      audit_.record(*cursor);
      ++st_.signals;
      signal_next_ = std::max(signal_next_, *cursor + 1);
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
  // The prefetch horizon moved; a new step has a new read-ahead bundle; a deferred fault may
  // be due (deferred_waiting_ is set under mu_, so a signal after the deferral sees it).
  if ((cursor && (cfg_.prefetch_depth > 0 || deferred_waiting_.load())) ||
      (cfg_.readahead && next_step != UINT64_MAX))
    notify();
}

void Pager::release_ahead_faults() {
  ahead_released_ = true;
  notify();
}

bool Pager::demand_filled_in(ChunkId c, uint64_t step) const {
  std::lock_guard lk(mu_);
  return c < chunks_ && books_[c].last_demand_step == static_cast<int64_t>(step);
}

bool Pager::resident(ChunkId c) const {
  std::lock_guard lk(mu_);
  return c < chunks_ && books_[c].state == ChunkState::Resident;
}

uint64_t Pager::fills_of(ChunkId c) const {
  std::lock_guard lk(mu_);
  return books_.at(c).fills;
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
  s.resident_chunks = books_.resident().size();
  s.signals_out_of_order = audit_.out_of_order();
  s.fault_count = fault_hist_.count();
  s.fault_p50_ns = fault_hist_.quantile(0.5);
  s.fault_p99_ns = fault_hist_.quantile(0.99);
  s.fault_max_ns = fault_hist_.max();
  s.demand_fault_count = demand_hist_.count();
  s.demand_fault_p50_ns = demand_hist_.quantile(0.5);
  s.demand_fault_p99_ns = demand_hist_.quantile(0.99);
  s.demand_fault_max_ns = demand_hist_.max();
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


SignalAudit Pager::audit() const {
  std::lock_guard lk(mu_);
  return audit_;
}

std::vector<ChunkId> Pager::resident_set() const {
  std::lock_guard lk(mu_);
  auto v = books_.resident();
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<ChunkId> Pager::pinned_set() const {
  std::lock_guard lk(mu_);
  std::vector<ChunkId> v;
  for (ChunkId c = 0; c < chunks_; ++c)
    if (books_[c].pins > 0) v.push_back(c);
  return v;
}


void Pager::pause(bool on) {
  paused_ = on;
  notify();
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





// ---- the fault loop -----------------------------------------------------------------










// ---- the fill machinery: every fill is a bundle of the Plan, moved by the fill path ------




// ---- FillOwner: what the fill path asks of the pager ----------------------------------






// ---- publication -------------------------------------------------------------------------
















}  // namespace resid
