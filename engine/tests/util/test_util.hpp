// Shared test helpers: temp directories, pattern files, the userfaultfd skip check.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
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

// nullopt when userfaultfd works here; otherwise the reason to GTEST_SKIP with. When the
// environment's RESIDENCY_REQUIRE names `uffd` (CI's machine has it), the missing feature is
// also recorded as a failure, so the skip cannot pass (tests/require_features.py, Python's side).
std::optional<std::string> uffd_unavailable();

// Whether RESIDENCY_REQUIRE (comma-separated feature names) names `feature`.
bool feature_required(const std::string& feature);

// Runs `binary args...`, stdout to `outfile` (default /dev/null), stderr captured; returns
// the exit status (128 + signal when killed, -1 if it could not start) and stderr.
struct Spawned {
  int status = -1;
  std::string err;
};
Spawned spawn_capture(const std::string& binary, const std::vector<std::string>& args, const std::string& errfile,
                      const std::string& outfile = "/dev/null");

// A residctl run as a process: its status, stderr, run directory and run.json (null when
// the run wrote none).
struct RunOut {
  int status = -1;
  std::string err, out;
  nlohmann::json j;
};
// Runs `binary args...` with "--out <out>" appended, stderr to <out>.stderr.
RunOut run_to(const std::string& binary, std::vector<std::string> args, const std::string& out);

// The whole file as bytes (empty if unreadable).
std::string slurp(const std::string& path);
// A JSON file, parsed (throws if unreadable or not JSON).
nlohmann::json load_json(const std::string& path);
bool exists(const std::string& path);
size_t count_lines(const std::string& s);

}  // namespace resid::test
