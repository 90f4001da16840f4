// Shared test helpers: temp directories, pattern files, the userfaultfd skip check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace resid::test {

// A fresh directory under $TMPDIR (or /var/tmp, which supports O_DIRECT, unlike tmpfs),
// removed with its contents at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `bytes` of the contract pattern with `seed` to `path`.
void write_pattern_file(const std::string& path, uint64_t bytes, uint64_t seed);

// nullopt when userfaultfd works here; otherwise the reason to GTEST_SKIP with.
std::optional<std::string> uffd_unavailable();

// Runs `binary args...`, stdout to /dev/null, stderr captured; returns the exit status
// (128 + signal when killed) and stderr.
struct Spawned {
  int status = -1;
  std::string err;
};
Spawned spawn_capture(const std::string& binary, const std::vector<std::string>& args, const std::string& errfile);

// The whole file as bytes (empty if unreadable).
std::string slurp(const std::string& path);

}  // namespace resid::test
