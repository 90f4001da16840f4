#include "core/fsutil.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.hpp"

namespace resid {

std::string errno_name(int err) {
  const char* n = strerrorname_np(err);
  return n ? std::string(n) : "errno " + std::to_string(err);
}

// Throws RunError after removing the temporary file: a failed write (ENOSPC, EIO) leaves
// neither a half-written file nor its .tmp behind.
void write_file_atomic(const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw RunError("cannot create " + tmp + ": " + errno_name(errno));
  const auto fail = [&](const char* what, int err) {
    ::unlink(tmp.c_str());
    throw RunError(std::string("cannot ") + what + " " + tmp + ": " + errno_name(err));
  };
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail("write", e);
    }
    done += static_cast<size_t>(n);
  }
  // fsync before rename: a crash must never leave a complete-looking but empty file.
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    fail("flush", e);
  }
  if (::close(fd) != 0) fail("flush", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename", errno);
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw RunError("cannot create directory " + path + ": " + ec.message());
  if (!std::filesystem::is_directory(path, ec)) throw RunError("not a directory: " + path);
}

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace resid
