// The pager's region: its mapping and registration, and how a fill lands in it
// (UFFDIO_COPY, UFFDIO_MOVE of a huge page, MADV_COLLAPSE) and wakes its waiters.
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "pager/pager_internal.hpp"

namespace resid {

// Maps the region, 2 MiB aligned, with the huge-page advice of the mode.
void Pager::map_region() {
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
  // --protect: every page the process faults in is locked, the region's included; only the
  // pager's evictions free them. The region is locked by itself too: the sanitizers turn
  // mlockall (not mlock2) into a no-op, and the region's lock is what the pager relies on.
  if (cfg_.protect && (::mlock2(base_, registered_bytes_, MLOCK_ONFAULT) != 0 ||
                       ::mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0)) {
    const int e = errno;
    ::munmap(base_, mapped_bytes_);
    ::close(evfd_);
    throw InputError("--protect: locking memory on fault failed (" + errno_name(e) +
                     "): raise RLIMIT_MEMLOCK (ulimit -l) or run without --protect");
  }
  // Beyond the file's last page there is no data: an access there is a bug, make it fault.
  if (mapped_bytes_ > registered_bytes_)
    ::mprotect(base_ + registered_bytes_, mapped_bytes_ - registered_bytes_, PROT_NONE);

}

// MISSING mode over the file's pages; COPY (and MOVE in `move` mode) must be offered.
void Pager::register_region() {
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

void Pager::finish_registration() {
  // PROT_NONE first, then unregister: unregistering wakes any thread still blocked in a
  // fault, and it must retry into a protection fault, never into a fresh zero page.
  // Only our own runs: a hole the application unmapped may hold someone else's mapping.
  for_each_mapped_run(books_.holes(), 0, books_.holes().size(), [&](uint64_t p, uint64_t q) {
    ::mprotect(base_ + p * page_, (q - p) * page_, PROT_NONE);
  });
  for_each_mapped_run(books_.holes(), 0, books_.holes().size(), [&](uint64_t p, uint64_t q) {
    uffdio_range r{reinterpret_cast<uintptr_t>(base_ + p * page_), (q - p) * page_};
    ::ioctl(uffd_.fd(), UFFDIO_UNREGISTER, &r);
  });
}

std::optional<uint64_t> Pager::region_huge_bytes() const { return region_smaps_bytes("AnonHugePages:"); }

std::optional<uint64_t> Pager::region_locked_bytes() const { return region_smaps_bytes("Locked:"); }

std::optional<uint64_t> Pager::region_smaps_bytes(const char* field) const {
  // /proc/self/smaps: sum `field` (kB) over the mappings that lie inside the region.
  std::ifstream in("/proc/self/smaps");
  if (!in) return std::nullopt;
  const auto lo = reinterpret_cast<uintptr_t>(base_), hi = lo + mapped_bytes_;
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

bool Pager::publish(ChunkId c, const std::byte* data, uint64_t data_len) {
  uint64_t from = 0;
  // `move`: a whole chunk (every page mapped, the full chunk size), read to a 2 MiB-aligned
  // address (the start of a window), is moved in; its pages leave the window, which the
  // source refaults on its next read. Anything else, or a failed move, is copied.
  if (cfg_.huge == HugeChunks::Move && data_len == cfg_.chunk_size && chunk_length(c) == cfg_.chunk_size &&
      books_[c].mapped_pages == chunk_pages_ && reinterpret_cast<uintptr_t>(data) % kHugePage == 0) {
    const auto [moved, e] = move_pages(base_ + first_page(c) * page_, data, cfg_.chunk_size);
    std::lock_guard lk(mu_);
    if (e == 0) {
      ++st_.move_fills;
      return true;
    }
    ++st_.move_fallbacks;
    st_.move_busy_fallbacks += e == EBUSY;
    if (!st_.move_first_errno) st_.move_first_errno = e;
    // What was moved is in place (whole pages); copy the rest from the window.
    from = moved / page_;
  }
  return copy_pages(c, data, from);
}

std::pair<uint64_t, int> Pager::move_pages(std::byte* dst, const std::byte* src, uint64_t len) {
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

void Pager::maybe_collapse(ChunkId c) {
  // `collapse`: the pager thread is the only one that evicts, so the chunk cannot go away
  // under the collapse; a concurrent unmap only makes it fail. The transient extra huge page
  // is paid by the chunk the caller reserved.
  if (cfg_.huge != HugeChunks::Collapse || chunk_length(c) != cfg_.chunk_size || books_[c].mapped_pages != chunk_pages_)
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
    if (books_.page_unmapped(p)) {  // a hole the application made: never COPY there
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < p0 + np && !books_.page_unmapped(q)) ++q;
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
  for_each_mapped_run(books_.holes(), p0, p0 + pages_in(c), [&](uint64_t p, uint64_t q) {
    uffdio_range r{reinterpret_cast<uintptr_t>(base_ + p * page_), (q - p) * page_};
    ::ioctl(uffd_.fd(), UFFDIO_WAKE, &r);
  });
}

}  // namespace resid
