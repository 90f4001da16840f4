// O_DIRECT alignment the filesystem reports (statx STATX_DIOALIGN, Linux >= 6.1).
#pragma once

#include <cstdint>

namespace resid {

// dio_offset_align for the open file, or 0 when the kernel/filesystem does not say.
uint32_t dio_offset_alignment(int fd);

}  // namespace resid
