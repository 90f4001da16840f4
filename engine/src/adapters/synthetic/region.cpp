#include "adapters/synthetic/region.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "adapters/synthetic/pattern.hpp"
#include "core/errors.hpp"

namespace resid {

void make_region(const std::string& path, uint64_t bytes, uint64_t seed) {
  if (bytes == 0 || bytes % 4096 != 0)
    throw InputError("--size " + std::to_string(bytes) + " is not a positive multiple of 4096");
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError("cannot create " + tmp + " (" + errno_name(errno) + ")");
  std::vector<std::byte> buf(1u << 20);
  uint64_t off = 0;
  while (off < bytes) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - off));
    fill_pattern(buf.data(), off, n, seed);
    size_t done = 0;
    while (done < n) {
      const ssize_t w = ::pwrite(fd, buf.data() + done, n - done, static_cast<off_t>(off + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int e = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        throw RunError("cannot write " + tmp + " (" + errno_name(e) + ")");
      }
      done += static_cast<size_t>(w);
    }
    off += n;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw RunError("cannot flush " + tmp + " (" + errno_name(errno) + ")");
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw RunError("cannot rename " + tmp + " (" + errno_name(errno) + ")");
}

uint64_t region_size(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError("region file " + path + " cannot be opened (" + errno_name(errno) + ")");
  if (!S_ISREG(st.st_mode)) throw InputError("region file " + path + " is not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == 0 || size % 4096 != 0)
    throw InputError("region file " + path + " has " + std::to_string(size) +
                     " bytes, not a positive multiple of 4096");
  return size;
}

}  // namespace resid
