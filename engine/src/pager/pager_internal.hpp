// What the pager's implementation files share (not part of its interface): kernel constants
// for builds against older headers and the mapped-run walk.
#pragma once

#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cstdint>
#include <vector>


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
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

namespace resid {

constexpr uint64_t kHugePage = 2u << 20;  // the PMD size on x86-64 and arm64 with 4 KiB pages

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

}  // namespace resid
