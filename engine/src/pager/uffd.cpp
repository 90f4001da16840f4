#include "pager/uffd.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "core/errors.hpp"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

namespace resid {

const char* to_string(UffdMode m) {
  switch (m) {
    case UffdMode::UserModeOnly: return "user-mode-only";
    case UffdMode::Syscall: return "syscall";
    case UffdMode::DevUserfaultfd: return "dev-userfaultfd";
  }
  return "?";
}

Uffd& Uffd::operator=(Uffd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    mode_ = o.mode_;
    o.fd_ = -1;
  }
  return *this;
}

Uffd::~Uffd() {
  if (fd_ >= 0) ::close(fd_);
}

int Uffd::api(uint64_t features, uint64_t* supported) {
  uffdio_api a{};
  a.api = UFFD_API;
  a.features = features;
  if (::ioctl(fd_, UFFDIO_API, &a) != 0) return errno;
  if (supported) *supported = a.features;
  return 0;
}

std::optional<Uffd> try_open_uffd(UffdMode mode, int* err) {
  const int base = O_CLOEXEC | O_NONBLOCK;
  int fd = -1;
  switch (mode) {
    case UffdMode::UserModeOnly:
      fd = static_cast<int>(::syscall(SYS_userfaultfd, base | UFFD_USER_MODE_ONLY));
      break;
    case UffdMode::Syscall:
      fd = static_cast<int>(::syscall(SYS_userfaultfd, base));
      break;
    case UffdMode::DevUserfaultfd: {
      const int dev = ::open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
      if (dev < 0) break;
      fd = ::ioctl(dev, USERFAULTFD_IOC_NEW, base);
      const int e = errno;
      ::close(dev);
      errno = e;
      break;
    }
  }
  if (fd < 0) {
    if (err) *err = errno;
    return std::nullopt;
  }
  return Uffd(fd, mode);
}

Uffd open_uffd() {
  std::string tried;
  int first_err = 0;
  for (UffdMode m : {UffdMode::UserModeOnly, UffdMode::Syscall, UffdMode::DevUserfaultfd}) {
    int e = 0;
    if (auto u = try_open_uffd(m, &e)) return std::move(*u);
    if (!first_err || first_err == EINVAL) first_err = e;  // EINVAL = flag unknown (old kernel)
    tried += std::string(tried.empty() ? "" : ", ") + to_string(m) + ": " + errno_name(e);
  }
  throw InputError("userfaultfd unavailable (" + errno_name(first_err) + "; tried " + tried +
                   "): run as root, or set vm.unprivileged_userfaultfd=1, or use kernel >= "
                   "5.11 for UFFD_USER_MODE_ONLY");
}

}  // namespace resid
