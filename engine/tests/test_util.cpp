#include "test_util.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

#include "errors.hpp"
#include "region.hpp"
#include "uffd.hpp"

namespace resid::test {

TempDir::TempDir() {
  const char* env = std::getenv("TMPDIR");
  std::string root = env && *env ? env : "/var/tmp";
  std::string tmpl = root + "/residctl-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed under " + root);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_pattern_file(const std::string& path, uint64_t bytes, uint64_t seed) {
  make_region(path, bytes, seed);
}

std::optional<std::string> uffd_unavailable() {
  try {
    open_uffd();
    return std::nullopt;
  } catch (const InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace resid::test
