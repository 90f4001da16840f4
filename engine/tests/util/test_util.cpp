#include "util/test_util.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "adapters/synthetic/region.hpp"
#include "core/errors.hpp"
#include "pager/uffd.hpp"

extern char** environ;

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

bool feature_required(const std::string& feature) {
  const char* names = std::getenv("RESIDENCY_REQUIRE");
  std::stringstream list(names ? names : "");
  for (std::string name; std::getline(list, name, ',');)
    if (name == feature) return true;
  return false;
}

std::optional<std::string> uffd_unavailable() {
  try {
    open_uffd();
    return std::nullopt;
  } catch (const InputError& e) {
    if (feature_required("uffd")) ADD_FAILURE() << "RESIDENCY_REQUIRE names uffd, but: " << e.what();
    return std::string(e.what());
  }
}

Spawned spawn_capture(const std::string& binary, const std::vector<std::string>& args, const std::string& errfile,
                      const std::string& outfile) {
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, errfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 1, outfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  Spawned r;
  const int e = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e != 0) return r;
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.err = slurp(errfile);
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

RunOut run_to(const std::string& binary, std::vector<std::string> args, const std::string& out) {
  args.insert(args.end(), {"--out", out});
  const Spawned s = spawn_capture(binary, args, out + ".stderr");
  RunOut r{s.status, s.err, out, nullptr};
  if (exists(out + "/run.json")) r.j = load_json(out + "/run.json");
  return r;
}

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char ch : s) n += ch == '\n';
  return n;
}

}  // namespace resid::test
