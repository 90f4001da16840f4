#include "drivers/probe/probe.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <liburing.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/errors.hpp"
#include "core/fsutil.hpp"
#include "drivers/probe/cgroup_probe.hpp"
#include "pager/uffd.hpp"
#include "source/window.hpp"

#ifndef RESID_LIBURING_VERSION
#define RESID_LIBURING_VERSION "unknown"
#endif

namespace resid {

namespace {

using nlohmann::json;

// Register `len` bytes at `addr` in `mode` on a fresh userfaultfd with `features`.
bool uffd_register_works(void* addr, size_t len, uint64_t features, uint64_t mode) {
  for (UffdMode m : {UffdMode::UserModeOnly, UffdMode::Syscall, UffdMode::DevUserfaultfd}) {
    auto u = try_open_uffd(m, nullptr);
    if (!u) continue;
    uint64_t supported = 0;
    if (u->api(features, &supported) != 0) return false;
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<uintptr_t>(addr);
    reg.range.len = len;
    reg.mode = mode;
    const bool ok = ::ioctl(u->fd(), UFFDIO_REGISTER, &reg) == 0;
    if (ok) {
      uffdio_range r{reinterpret_cast<uintptr_t>(addr), len};
      ::ioctl(u->fd(), UFFDIO_UNREGISTER, &r);
    }
    return ok;
  }
  return false;
}

json probe_uffd() {
  json j;
  json errors = json::object();
  std::optional<std::string> how;
  for (auto [key, mode] : {std::pair{"user_mode_only", UffdMode::UserModeOnly},
                           std::pair{"syscall", UffdMode::Syscall},
                           std::pair{"dev_userfaultfd", UffdMode::DevUserfaultfd}}) {
    int err = 0;
    const bool ok = try_open_uffd(mode, &err).has_value();
    j[key] = ok;
    if (!ok) errors[key] = errno_name(err);
    if (ok && !how) how = to_string(mode);
  }
  const auto sysctl = read_text_file("/proc/sys/vm/unprivileged_userfaultfd");
  j["unprivileged_sysctl"] = sysctl ? json(std::atoi(trim(*sysctl).c_str())) : json(nullptr);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

  bool missing = false;
  if (void* a = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      a != MAP_FAILED) {
    missing = uffd_register_works(a, 4 * page, UFFD_FEATURE_EVENT_UNMAP, UFFDIO_REGISTER_MODE_MISSING);
    ::munmap(a, 4 * page);
  }
  j["missing"] = missing;

  bool minor = false;
  const int mfd = ::memfd_create("residctl-probe", MFD_CLOEXEC);
  if (mfd >= 0) {
    if (::ftruncate(mfd, static_cast<off_t>(4 * page)) == 0) {
      void* a = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
      if (a != MAP_FAILED) {
        minor = uffd_register_works(a, 4 * page, UFFD_FEATURE_MINOR_SHMEM, UFFDIO_REGISTER_MODE_MINOR);
        ::munmap(a, 4 * page);
      }
    }
    ::close(mfd);
  }
  j["minor_shmem"] = minor;
  j["how"] = how ? json(*how) : json(nullptr);
  if (!errors.empty()) j["errors"] = errors;  // errno of each way that failed
  return j;
}

json probe_o_direct(const std::string& dir) {
  json j;
  char resolved[PATH_MAX];
  j["dir"] = ::realpath(dir.c_str(), resolved) ? std::string(resolved) : dir;
  j["supported"] = false;
  j["min_alignment"] = nullptr;
  std::string tmpl = dir + "/.residctl-probe-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int wfd = ::mkstemp(name.data());
  if (wfd < 0) {
    j["reason"] = "cannot create a test file in " + dir + " (" + errno_name(errno) + ")";
    return j;
  }
  const std::string path(name.data());
  std::vector<char> data(8192, 'r');
  const bool written = ::write(wfd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) &&
                       ::fsync(wfd) == 0;
  ::close(wfd);
  if (!written) {
    ::unlink(path.c_str());
    j["reason"] = "cannot write the test file";
    return j;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    j["reason"] = "open with O_DIRECT failed (" + errno_name(errno) + ")";
    ::unlink(path.c_str());
    return j;
  }
  std::byte* buf = alloc_aligned_buffer(kHugeAlign);
  // Smallest alignment that works for offset, length and memory alike.
  for (size_t a : {size_t{512}, size_t{4096}}) {
    if (::pread(fd, buf + a, a, static_cast<off_t>(a)) == static_cast<ssize_t>(a)) {
      j["supported"] = true;
      j["min_alignment"] = a;
      break;
    }
    j["reason"] = "aligned O_DIRECT read failed (" + errno_name(errno) + ")";
  }
  if (j["supported"].get<bool>()) j.erase("reason");
  free_aligned_buffer(buf, kHugeAlign);
  ::close(fd);
  ::unlink(path.c_str());
  return j;
}

json probe_io_uring() {
  json j;
  j["liburing"] = RESID_LIBURING_VERSION;
  io_uring ring{};
  int r = io_uring_queue_init(4, &ring, 0);
  if (r < 0) {
    j["supported"] = false;
    j["reason"] = "io_uring_queue_init failed (" + errno_name(-r) + ")";
    return j;
  }
  bool ok = false;
  std::string reason;
  if (io_uring_sqe* sqe = io_uring_get_sqe(&ring)) {
    io_uring_prep_nop(sqe);
    if ((r = io_uring_submit(&ring)) == 1) {
      io_uring_cqe* cqe = nullptr;
      if ((r = io_uring_wait_cqe(&ring, &cqe)) == 0) {
        ok = cqe->res == 0;
        if (!ok) reason = "NOP completed with " + errno_name(-cqe->res);
        io_uring_cqe_seen(&ring, cqe);
      } else {
        reason = "wait for NOP failed (" + errno_name(-r) + ")";
      }
    } else {
      reason = "submit of NOP failed (" + errno_name(r < 0 ? -r : EIO) + ")";
    }
  }
  io_uring_queue_exit(&ring);
  j["supported"] = ok;
  if (!ok) j["reason"] = reason;
  return j;
}

}  // namespace

json run_probe(const std::string& dir) {
  json j;
  j["schema_version"] = 1;
  utsname u{};
  ::uname(&u);
  j["kernel"] = {{"release", u.release}, {"machine", u.machine}, {"page_size", ::sysconf(_SC_PAGESIZE)}};
  j["userfaultfd"] = probe_uffd();
  j["o_direct"] = probe_o_direct(dir);
  j["io_uring"] = probe_io_uring();
  const CgroupInfo cg = probe_cgroup();
  j["cgroup"] = {{"version", cg.version ? json(*cg.version) : json(nullptr)},
                 {"memory_path", cg.memory_path.empty() ? json(nullptr) : json(cg.memory_path)},
                 {"writable", cg.writable},
                 {"reason", cg.reason}};
  const auto thp = read_text_file("/sys/kernel/mm/transparent_hugepage/enabled");
  j["transparent_hugepage"] = thp ? json(trim(*thp)) : json(nullptr);
  return j;
}

}  // namespace resid
