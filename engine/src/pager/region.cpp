// The region: its geometry, mapping and registration, how a fill lands in it (UFFDIO_COPY,
// UFFDIO_MOVE of a huge page, MADV_COLLAPSE), evictions' discards, wakes and the close.
#include "pager/region.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "pager/pager_internal.hpp"

namespace resid {

Region::Geometry Region::geometry(const PagerConfig& cfg, const Source& source) {
  Geometry g;
  g.page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (cfg.chunk_size == 0 || cfg.chunk_size % g.page != 0)
    throw InputError("chunk size " + std::to_string(cfg.chunk_size) +
                     " is not a positive multiple of the page size (" + std::to_string(g.page) + ")");
  if (cfg.budget_chunks == 0) throw InputError("pager budget must be at least one chunk");
  if (cfg.defer_ahead_faults && !cfg.step_chunks.empty())
    throw std::invalid_argument("defer_ahead_faults needs chunk steps (a fault's step is known only there)");
  if (source.window_capacity() < cfg.chunk_size) throw std::invalid_argument("source window smaller than a chunk");
  g.file_bytes = source.file_size();
  if (g.file_bytes == 0) throw InputError("region file is empty");
  const uint64_t n = (g.file_bytes + cfg.chunk_size - 1) / cfg.chunk_size;
  if (n > UINT32_MAX) throw InputError("too many chunks");
  g.chunks = static_cast<uint32_t>(n);
  if (!cfg.chunk_digests.empty() && cfg.chunk_digests.size() != g.chunks)
    throw InputError("content digests for " + std::to_string(cfg.chunk_digests.size()) + " chunks, the file has " +
                     std::to_string(g.chunks));
  g.chunk_pages = cfg.chunk_size / g.page;
  g.registered_bytes = (g.file_bytes + g.page - 1) / g.page * g.page;
  g.mapped_bytes = n * cfg.chunk_size;
  g.windows = static_cast<uint32_t>(source.window_count());
  return g;
}

Region::Region(PagerShared& sh, const Geometry& g) : sh_(sh), g_(g) {
  check_huge_support();
  open_userfaultfd();
  map_region();
  register_region();
  sh_.books.init(g_.chunks, g_.chunk_pages, g_.registered_bytes / g_.page);
  if (sh_.cfg.huge == HugeChunks::Move) {
    spares_.reserve(g_.windows);
    moved_whole_.assign(g_.chunks, 0);
  }
}

Region::~Region() {
  if (!base_) return;
  const auto& holes = sh_.books.holes();
  for_each_mapped_run(holes, 0, holes.size(), [&](uint64_t p, uint64_t q) {
    ::munmap(base_ + p * g_.page, (q - p) * g_.page);
  });
  if (g_.mapped_bytes > g_.registered_bytes) ::munmap(base_ + g_.registered_bytes, g_.mapped_bytes - g_.registered_bytes);
  if (sh_.cfg.protect) ::munlockall();
}

void Region::check_huge_support() const {
  const PagerConfig& cfg = sh_.cfg;
  if (cfg.protect && cfg.huge == HugeChunks::Move)
    throw InputError("--protect: UFFDIO_MOVE cannot move into an mlocked region; use --huge-chunks off or collapse");
  if (cfg.huge == HugeChunks::Move) {
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
  if (cfg.huge != HugeChunks::Off && cfg.chunk_size % kHugePage != 0)
    throw InputError(std::string("--huge-chunks ") + to_string(cfg.huge) + " needs a chunk size that is a multiple of " +
                     std::to_string(kHugePage) + " bytes (got " + std::to_string(cfg.chunk_size) + ")");
}

void Region::open_userfaultfd() {
  uffd_ = open_uffd();
  // EVENT_UNMAP: an application munmap must drop chunks, or a later COPY would land in a
  // hole. Not EVENT_REMOVE: our own MADV_DONTNEED would then block waiting for the very
  // thread that issued it to read the event. THREAD_ID (Linux 4.14): the faulting thread,
  // for the per-thread pins of oversize steps. MOVE (6.8): the zero-copy huge chunks.
  uint64_t want = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_THREAD_ID;
  if (sh_.cfg.huge == HugeChunks::Move) want |= UFFD_FEATURE_MOVE;
  if (int e = uffd_.api(want); e != 0) {
    if (sh_.cfg.huge == HugeChunks::Move)
      throw InputError("userfaultfd API handshake failed (" + errno_name(e) +
                       "): --huge-chunks move needs UFFD_FEATURE_MOVE (Linux >= 6.8); use --huge-chunks off");
    throw InputError("userfaultfd API handshake failed (" + errno_name(e) + ")");
  }
}

// Maps the region, 2 MiB aligned, with the huge-page advice of the mode.
void Region::map_region() {
  // 2 MiB aligned (over-map and trim), so a chunk of 2 MiB is one PMD and can be one
  // huge page. UFFDIO_MOVE only moves between writable mappings of equal protection, so
  // the region is writable in `move` mode (llama.cpp maps it read-only and never writes;
  // a write would fault into the pager like a read and land in the pager's private copy).
  const int prot = sh_.cfg.huge == HugeChunks::Move ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = ::mmap(nullptr, g_.mapped_bytes + kHugePage, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    throw InputError("cannot map the pager region (" + errno_name(e) + ")");
  }
  {
    const auto raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (raw + kHugePage - 1) & ~static_cast<uintptr_t>(kHugePage - 1);
    if (aligned > raw) ::munmap(p, aligned - raw);
    const uintptr_t end = raw + g_.mapped_bytes + kHugePage;
    if (end > aligned + g_.mapped_bytes) ::munmap(reinterpret_cast<void*>(aligned + g_.mapped_bytes), end - aligned - g_.mapped_bytes);
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
  if (sh_.cfg.huge == HugeChunks::Off) ::madvise(base_, g_.mapped_bytes, MADV_NOHUGEPAGE);
  if (sh_.cfg.huge == HugeChunks::Move) ::madvise(base_, g_.mapped_bytes, MADV_HUGEPAGE);
  // --protect: every page the process faults in is locked, the region's included; only the
  // pager's evictions free them. The region is locked by itself too: the sanitizers turn
  // mlockall (not mlock2) into a no-op, and the region's lock is what the pager relies on.
  if (sh_.cfg.protect && (::mlock2(base_, g_.registered_bytes, MLOCK_ONFAULT) != 0 ||
                       ::mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0)) {
    const int e = errno;
    ::munmap(base_, g_.mapped_bytes);
    throw InputError("--protect: locking memory on fault failed (" + errno_name(e) +
                     "): raise RLIMIT_MEMLOCK (ulimit -l) or run without --protect");
  }
  // Beyond the file's last page there is no data: an access there is a bug, make it fault.
  if (g_.mapped_bytes > g_.registered_bytes)
    ::mprotect(base_ + g_.registered_bytes, g_.mapped_bytes - g_.registered_bytes, PROT_NONE);

}

// MISSING mode over the file's pages; COPY (and MOVE in `move` mode) must be offered.
void Region::register_region() {
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<uintptr_t>(base_);
  reg.range.len = g_.registered_bytes;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  if (::ioctl(uffd_.fd(), UFFDIO_REGISTER, &reg) != 0) {
    const int e = errno;
    ::munmap(base_, g_.mapped_bytes);
    throw InputError("UFFDIO_REGISTER (missing mode) failed (" + errno_name(e) + ")");
  }
  if (!(reg.ioctls & (1ULL << _UFFDIO_COPY))) {
    ::munmap(base_, g_.mapped_bytes);
    throw InputError("userfaultfd region does not support UFFDIO_COPY");
  }
  if (sh_.cfg.huge == HugeChunks::Move && !(reg.ioctls & (1ULL << _UFFDIO_MOVE))) {
    ::munmap(base_, g_.mapped_bytes);
    throw InputError("userfaultfd region does not support UFFDIO_MOVE (--huge-chunks move needs Linux >= 6.8); use "
                     "--huge-chunks off");
  }
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

void Region::finish_registration() {
  // PROT_NONE first, then unregister: unregistering wakes any thread still blocked in a
  // fault, and it must retry into a protection fault, never into a fresh zero page.
  // Only our own runs: a hole the application unmapped may hold someone else's mapping.
  for_each_mapped_run(sh_.books.holes(), 0, sh_.books.holes().size(), [&](uint64_t p, uint64_t q) {
    ::mprotect(base_ + p * g_.page, (q - p) * g_.page, PROT_NONE);
  });
  for_each_mapped_run(sh_.books.holes(), 0, sh_.books.holes().size(), [&](uint64_t p, uint64_t q) {
    uffdio_range r{reinterpret_cast<uintptr_t>(base_ + p * g_.page), (q - p) * g_.page};
    ::ioctl(uffd_.fd(), UFFDIO_UNREGISTER, &r);
  });
  release_windows();
}

void Region::release_windows() {
  for (Spare& s : spares_) {
    if (!s.registered) continue;
    uffdio_range r{reinterpret_cast<uintptr_t>(s.addr), sh_.cfg.chunk_size};
    ::ioctl(uffd_.fd(), UFFDIO_UNREGISTER, &r);
    s.registered = s.empty = false;
  }
}

Region::Spare* Region::spare_of_locked(const std::byte* data) {
  for (Spare& s : spares_)
    if (data >= s.addr && data < s.addr + sh_.cfg.chunk_size) return &s;
  return nullptr;
}

void Region::note_moved_out_locked(const std::byte* window) {
  Spare* s = spare_of_locked(window);
  if (!s) {
    if (spares_.size() == spares_.capacity()) return;  // more windows than the source said: none kept
    spares_.push_back({const_cast<std::byte*>(window), false, false});
    s = &spares_.back();
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<uintptr_t>(window);
    reg.range.len = sh_.cfg.chunk_size;
    reg.mode = UFFDIO_REGISTER_MODE_WP;
    const bool ok = ::ioctl(uffd_.fd(), UFFDIO_REGISTER, &reg) == 0;
    const int e = ok ? EINVAL : errno;  // registered without MOVE offered: EINVAL
    if (!ok || !(reg.ioctls & (1ULL << _UFFDIO_MOVE))) {
      if (ok) ::ioctl(uffd_.fd(), UFFDIO_UNREGISTER, &reg.range);
      if (!sh_.st.recycle_first_errno) sh_.st.recycle_first_errno = e;
      return;  // kept unregistered: never a recycling target
    }
    s->registered = true;
  }
  s->empty = s->registered;
}

bool Region::recycle_locked(ChunkId c) {
  if (moved_whole_.empty() || !moved_whole_[c]) return false;
  moved_whole_[c] = 0;
  if (sh_.books[c].mapped_pages != g_.chunk_pages) return false;
  Spare* s = nullptr;
  for (Spare& x : spares_) {
    if (!x.registered || !x.empty) continue;
    // The hint is stale once a read went into the window (several windows, reads in flight):
    // its first page is present again then.
    unsigned char v = 0;
    if (::mincore(x.addr, g_.page, &v) == 0 && (v & 1)) {
      x.empty = false;
      continue;
    }
    s = &x;
    break;
  }
  if (!s) return false;
  s->empty = false;  // full after the move; on a refusal, refilled (EEXIST) or not to be tried again
  uffdio_move mv{};
  mv.dst = reinterpret_cast<uintptr_t>(s->addr);
  mv.src = reinterpret_cast<uintptr_t>(base_ + first_page(c) * g_.page);
  mv.len = sh_.cfg.chunk_size;
  mv.mode = UFFDIO_MOVE_MODE_DONTWAKE;  // nothing waits on a window
  if (::ioctl(uffd_.fd(), UFFDIO_MOVE, &mv) == 0) {
    ++sh_.st.move_recycles;
    return true;
  }
  const int e = errno;
  ++sh_.st.recycle_misses;
  if (!sh_.st.recycle_first_errno) sh_.st.recycle_first_errno = e;
  return false;  // the caller discards what is left of the chunk
}

std::optional<uint64_t> Region::smaps_bytes(const char* field) const {
  // /proc/self/smaps: sum `field` (kB) over the mappings that lie inside the region.
  std::ifstream in("/proc/self/smaps");
  if (!in) return std::nullopt;
  const auto lo = reinterpret_cast<uintptr_t>(base_), hi = lo + g_.mapped_bytes;
  const size_t flen = std::strlen(field);
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
    if (inside && line.rfind(field, 0) == 0) kb += std::stoull(line.substr(flen));
  }
  return kb * 1024;
}

bool Region::publish(ChunkId c, const std::byte* data, uint64_t data_len) {
  uint64_t from = 0;
  // `move`: a whole chunk (every page mapped, the full chunk size), read to a 2 MiB-aligned
  // address (the start of a window), is moved in; its pages leave the window, which the
  // source refaults on its next read. Anything else, or a failed move, is copied.
  if (sh_.cfg.huge == HugeChunks::Move && data_len == sh_.cfg.chunk_size && chunk_length(c) == sh_.cfg.chunk_size &&
      sh_.books[c].mapped_pages == g_.chunk_pages && reinterpret_cast<uintptr_t>(data) % kHugePage == 0) {
    const auto [moved, e] = move_pages(base_ + first_page(c) * g_.page, data, sh_.cfg.chunk_size);
    std::lock_guard lk(sh_.mu);
    if (e == 0) {
      ++sh_.st.move_fills;
      moved_whole_[c] = 1;
      note_moved_out_locked(data);
      return true;
    }
    ++sh_.st.move_fallbacks;
    sh_.st.move_busy_fallbacks += e == EBUSY;
    if (!sh_.st.move_first_errno) sh_.st.move_first_errno = e;
    // What was moved is in place (whole pages); copy the rest from the window.
    from = moved / g_.page;
  }
  if (!moved_whole_.empty()) {
    std::lock_guard lk(sh_.mu);
    moved_whole_[c] = 0;
    if (Spare* s = spare_of_locked(data)) s->empty = false;  // the read refilled it
  }
  return copy_pages(c, data, from);
}

std::pair<uint64_t, int> Region::move_pages(std::byte* dst, const std::byte* src, uint64_t len) {
  // EBUSY is transient (a folio another kernel path holds locked or referenced for a moment:
  // a page-access scan such as DAMON's, compaction): the rest is moved again, with short
  // sleeps for up to about a millisecond, before the caller copies it. Any other error is
  // final.
  constexpr int kBusyTries = 8;
  uint64_t done = 0;
  for (int busy = 0;;) {
    uffdio_move mv{};
    mv.dst = reinterpret_cast<uintptr_t>(dst + done);
    mv.src = reinterpret_cast<uintptr_t>(src + done);
    mv.len = len - done;
    mv.mode = UFFDIO_MOVE_MODE_DONTWAKE;  // woken after booking, as for COPY
    const int rc = ::ioctl(uffd_.fd(), UFFDIO_MOVE, &mv);
    const int e = rc == 0 ? 0 : errno;
    if (mv.move > 0) done += static_cast<uint64_t>(mv.move);
    if (rc == 0 || done >= len) return {len, 0};
    if (e != EBUSY || ++busy >= kBusyTries) return {done, e};
    std::this_thread::sleep_for(std::chrono::microseconds(25 << busy / 2));
  }
}

void Region::maybe_collapse(ChunkId c) {
  // `collapse`: the pager thread is the only one that evicts, so the chunk cannot go away
  // under the collapse; a concurrent unmap only makes it fail. The transient extra huge page
  // is paid by the chunk the caller reserved.
  if (sh_.cfg.huge != HugeChunks::Collapse || chunk_length(c) != sh_.cfg.chunk_size || sh_.books[c].mapped_pages != g_.chunk_pages)
    return;
  const int rc = ::madvise(base_ + first_page(c) * g_.page, sh_.cfg.chunk_size, MADV_COLLAPSE);
  const int e = errno;
  std::lock_guard lk(sh_.mu);
  if (rc == 0) {
    ++sh_.st.collapses;
  } else {
    ++sh_.st.collapse_failures;
    if (!sh_.st.collapse_first_errno) sh_.st.collapse_first_errno = e;
  }
  if (sh_.cfg.eager_reconcile) reconcile_locked();
}

bool Region::copy_pages(ChunkId c, const std::byte* data, uint64_t from_page) {
  const uint64_t p0 = first_page(c), np = pages_in(c);
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(sh_.cfg.watchdog_s * 1e9);
  uint64_t p = p0 + from_page;
  while (p < p0 + np) {
    if (sh_.books.page_unmapped(p)) {  // a hole the application made: never COPY there
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < p0 + np && !sh_.books.page_unmapped(q)) ++q;
    uffdio_copy cp{};
    cp.dst = reinterpret_cast<uintptr_t>(base_ + p * g_.page);
    cp.src = reinterpret_cast<uintptr_t>(data + (p - p0) * g_.page);
    cp.len = (q - p) * g_.page;
    // DONTWAKE: waiters wake only after the books say "resident" (see wake_chunk), so a
    // driver that finishes the chunk can never observe a fill the books do not show yet.
    cp.mode = UFFDIO_COPY_MODE_DONTWAKE;
    if (::ioctl(uffd_.fd(), UFFDIO_COPY, &cp) == 0) {
      p = q;
      continue;
    }
    const int e = errno;
    if (cp.copy > 0) p += static_cast<uint64_t>(cp.copy) / g_.page;  // partial progress
    if (e == EAGAIN || e == ENOENT || e == EFAULT) {
      // The address space is changing (an unmap event is queued, or the range vanished):
      // read the events, which mark holes, then continue with what is still mapped.
      {
        std::lock_guard lk(sh_.mu);
        ++sh_.st.copy_retries;
      }
      read_events_();
      if (now_ns() > deadline) {
        sh_.fail("UFFDIO_COPY for chunk " + std::to_string(c) + " kept failing (" + errno_name(e) + ")");
        return false;
      }
      if (e == EAGAIN) sched_yield();
      continue;
    }
    sh_.fail("UFFDIO_COPY for chunk " + std::to_string(c) + " failed (" + errno_name(e) + ")");
    return false;
  }
  return true;
}

void Region::wake_chunk(ChunkId c) {
  const uint64_t p0 = first_page(c);
  for_each_mapped_run(sh_.books.holes(), p0, p0 + pages_in(c), [&](uint64_t p, uint64_t q) {
    uffdio_range r{reinterpret_cast<uintptr_t>(base_ + p * g_.page), (q - p) * g_.page};
    ::ioctl(uffd_.fd(), UFFDIO_WAKE, &r);
  });
}

void Region::wake_range(uintptr_t lo, uintptr_t hi) {
  uffdio_range r{lo, hi - lo};
  ::ioctl(uffd_.fd(), UFFDIO_WAKE, &r);
}

uint64_t Region::chunk_length(ChunkId c) const {
  const uint64_t start = static_cast<uint64_t>(c) * sh_.cfg.chunk_size;
  return std::min(sh_.cfg.chunk_size, g_.registered_bytes - start);
}

bool Region::holds(uintptr_t addr) const {
  const auto b = reinterpret_cast<uintptr_t>(base_);
  return addr >= b && addr < b + g_.registered_bytes;
}

ChunkId Region::chunk_of(uintptr_t addr) const {
  return static_cast<ChunkId>((addr - reinterpret_cast<uintptr_t>(base_)) / sh_.cfg.chunk_size);
}

void Region::discard(ChunkId c) {
  if (recycle_locked(c)) return;
  // Cannot fail on a mapped range; a concurrent unmap only removes pages sooner.
  const uint64_t p0 = first_page(c);
  for_each_mapped_run(sh_.books.holes(), p0, p0 + pages_in(c), [&](uint64_t p, uint64_t q) {
    ::madvise(base_ + p * g_.page, (q - p) * g_.page, sh_.cfg.protect ? MADV_DONTNEED_LOCKED : MADV_DONTNEED);
  });
}

std::pair<uintptr_t, uintptr_t> Region::book_unmap(uintptr_t start, uintptr_t end) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
  const uintptr_t lo = std::max(start, b);
  const uintptr_t hi = std::min(end, b + g_.registered_bytes);
  std::lock_guard lk(sh_.mu);
  ++sh_.st.unmap_events;
  if (lo >= hi) return {lo, hi};
  ChunkBooks& books = sh_.books;
  for (uint64_t p = (lo - b) / g_.page; p < (hi - b + g_.page - 1) / g_.page; ++p) {
    if (books.page_unmapped(p)) continue;
    const ChunkId c = static_cast<ChunkId>(p / g_.chunk_pages);
    if (!books.unmap_page(p)) continue;
    // The kernel freed whatever was there: drop the chunk from the books (not an eviction:
    // nothing was decided) and never COPY into it again. Its slot's version is gone too (a
    // chunk still being read is dropped when its bundle publishes).
    if (books[c].state == ChunkState::Resident) {
      books.remove_resident(c);
      if (sh_.plan->recycle(static_cast<int32_t>(c)) == PlanError::ConsumersLive) ++sh_.st.plan_recycle_refusals;
      books[c].state = ChunkState::Absent;
    }
    ++sh_.st.unmapped_chunks;
  }
  return {lo, hi};
}

void Region::reconcile_locked() {
  ++sh_.st.reconcile_checks;
  // Not against the Plan once the run failed (a failed bundle's slots are vacated before its
  // chunks leave the books), nor after the Plan's shutdown (every slot is VACANT then).
  const Plan* plan = sh_.failed || sh_.plan_shutdown ? nullptr : sh_.plan.get();
  sh_.st.reconcile_mismatches += sh_.books.reconcile(base_, g_.page, plan, &sh_.st.max_present_pages);
}

}  // namespace resid
