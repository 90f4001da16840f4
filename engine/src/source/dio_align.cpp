// Kept in its own translation unit: glibc's <sys/stat.h> struct statx predates the DIO
// fields, so this file uses the kernel's definition and the raw syscall instead.
#include "source/dio_align.hpp"

#include <linux/fcntl.h>
#include <linux/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace resid {

uint32_t dio_offset_alignment(int fd) {
#ifdef STATX_DIOALIGN
  struct statx stx {};
  if (::syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN))
    return stx.stx_dio_offset_align;
#else
  (void)fd;
#endif
  return 0;
}

}  // namespace resid
