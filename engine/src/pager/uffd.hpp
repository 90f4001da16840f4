// Opening a userfaultfd. Tried in this order, and the one that worked is recorded:
//   1. userfaultfd(O_CLOEXEC|O_NONBLOCK|UFFD_USER_MODE_ONLY)  works unprivileged on >= 5.11
//      even with vm.unprivileged_userfaultfd=0; only user-mode faults are delivered
//   2. userfaultfd(O_CLOEXEC|O_NONBLOCK)                      needs CAP_SYS_PTRACE or the sysctl
//   3. open("/dev/userfaultfd") + USERFAULTFD_IOC_NEW         needs access to the device node
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace resid {

enum class UffdMode { UserModeOnly, Syscall, DevUserfaultfd };
const char* to_string(UffdMode m);

class Uffd {
 public:
  Uffd() = default;
  Uffd(int fd, UffdMode mode) : fd_(fd), mode_(mode) {}
  Uffd(Uffd&& o) noexcept : fd_(o.fd_), mode_(o.mode_) { o.fd_ = -1; }
  Uffd& operator=(Uffd&& o) noexcept;
  Uffd(const Uffd&) = delete;
  Uffd& operator=(const Uffd&) = delete;
  ~Uffd();

  int fd() const { return fd_; }
  UffdMode mode() const { return mode_; }
  explicit operator bool() const { return fd_ >= 0; }

  // UFFDIO_API handshake asking for `features`; returns 0 or the errno. The kernel's
  // supported feature set is stored in *supported when given.
  int api(uint64_t features, uint64_t* supported = nullptr);

 private:
  int fd_ = -1;
  UffdMode mode_ = UffdMode::UserModeOnly;
};

// Try one way of opening (O_CLOEXEC|O_NONBLOCK always).
std::optional<Uffd> try_open_uffd(UffdMode mode, int* err);

// First way that works, or throws InputError with every errno and what to do about it.
Uffd open_uffd();

}  // namespace resid
