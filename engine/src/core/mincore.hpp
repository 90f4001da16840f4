// Kernel residency of a mapped range via mincore(2): the kernel's side of the pager's
// bookkeeping, and the miss test of arm A.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace resid {

struct PageCount {
  bool ok = false;       // false: the range (or part of it) is not mapped
  size_t present = 0;
  size_t pages = 0;
};

// Count present pages of [addr, addr+len) (page aligned). `scratch` is reused so the
// check does not allocate on the pager's path once sized.
PageCount count_resident(const void* addr, size_t len, std::vector<unsigned char>& scratch);

}  // namespace resid
