// Shared test helpers: temp directories, pattern files, the userfaultfd skip check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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

}  // namespace resid::test
