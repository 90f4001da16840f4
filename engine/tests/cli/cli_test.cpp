// The residctl binary, end to end: exit statuses, run directories, the one-line errors.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "core/sha256.hpp"
#include "util/test_util.hpp"

using namespace resid;

namespace {

using test::count_lines;
using test::exists;

// Runs residctl with `args`; stderr captured to a file.
test::Spawned run(const std::vector<std::string>& args, const std::string& errfile) {
  return test::spawn_capture(RESIDCTL_PATH, args, errfile);
}

nlohmann::json load(const std::string& path) { return test::load_json(path); }

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    region_ = dir_.file("r.bin");
    errf_ = dir_.file("stderr.txt");
    auto r = run({"mkregion", "--out", region_, "--size", std::to_string(16 * 65536), "--seed", "3"}, errf_);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  std::vector<std::string> scan_args(const std::string& arm, const std::string& out) {
    return {"scan", "--region", region_, "--seed", "3", "--out", out, "--arm", arm,
            "--budget-bytes", std::to_string(7 * 65536), "--chunk-size", "65536",
            "--passes", "2", "--threads", "2", "--eager-reconcile"};
  }
  test::TempDir dir_;
  std::string region_, errf_;
};

}  // namespace

class CliArm : public Cli, public ::testing::WithParamInterface<std::string> {};

TEST_P(CliArm, ScansAndWritesTheRunDirectory) {
  const std::string arm = GetParam();
  if (arm != "kernel-mmap")
    if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  {
    const std::string out = dir_.file("run-" + arm);
    auto r = run(scan_args(arm, out), errf_);
    ASSERT_EQ(r.status, 0) << arm << ": " << r.err;
    ASSERT_TRUE(exists(out + "/run.json")) << arm;
    ASSERT_TRUE(exists(out + "/trace.bin")) << arm;
    const auto j = load(out + "/run.json");
    EXPECT_EQ(j["status"], "ok");
    EXPECT_EQ(j["arm"], arm);
    EXPECT_EQ(j["counters"]["steps"], 32);
    EXPECT_EQ(j["counters"]["accesses"], 32);
    EXPECT_EQ(j["counters"]["verify_errors"], 0);
    EXPECT_EQ(j["counters"]["bytes_verified"], 2 * 16 * 65536);
    EXPECT_EQ(j["counters"]["reconcile_mismatches"], 0);
    EXPECT_EQ(j["trace"]["records"].get<uint64_t>() * 16 + 32,
              static_cast<uint64_t>(std::ifstream(out + "/trace.bin", std::ios::ate | std::ios::binary).tellg()));
    if (arm == "kernel-mmap") {
      EXPECT_TRUE(j["policy"].is_null());
      EXPECT_TRUE(j["uffd_mode"].is_null());
    } else {
      EXPECT_EQ(j["source_engine"], "direct");
      EXPECT_FALSE(j["uffd_mode"].is_null());
      // (7 chunks of budget - one window chunk - 8 KiB of page tables) / 64 KiB = 5.
      EXPECT_EQ(j["budget"]["page_table_bytes"], 8192);
      EXPECT_EQ(j["budget"]["budget_chunks"], 5);
      EXPECT_LE(j["counters"]["max_resident_chunks"].get<int>(), 5);
      EXPECT_GT(j["counters"]["reconcile_checks"].get<int>(), 0);
    }
    if (arm == "pager-lru" || arm == "pager-zero") {
      EXPECT_EQ(j["counters"]["misses"], 32) << arm;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arms, CliArm,
                         ::testing::Values("kernel-mmap", "pager-lru", "pager-declared", "pager-prefetch", "pager-zero"),
                         [](const auto& p) {
                           std::string n = p.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The scan's sources through the Plan: P, D and F (uring, eight windows, the next chunk read
// ahead) verify every byte and close balanced; F allocates nothing on its read path. (The
// TSan build runs this through its instrumented binary: the pager thread, the uring source
// and the driver threads.)
TEST_F(Cli, EverySourceScansThroughThePlan) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  for (std::string source : {"buffered", "direct", "uring"}) {
    const std::string out = dir_.file("src-" + source);
    auto args = scan_args("pager-declared", out);
    const uint64_t windows = source == "uring" ? 8 : 1;
    // Seven chunks of cache for every source: F pays its seven extra windows on top.
    args[10] = std::to_string((7 + windows - 1) * 65536);
    args.insert(args.end(), {"--source", source, "--compute-us", "200"});
    auto r = run(args, errf_);
    ASSERT_EQ(r.status, 0) << source << ": " << r.err;
    const auto j = load(out + "/run.json");
    EXPECT_EQ(j["status"], "ok") << source;
    EXPECT_EQ(j["source_engine"], source);
    EXPECT_EQ(j["counters"]["verify_errors"], 0) << source;
    EXPECT_EQ(j["counters"]["bytes_verified"], 2 * 16 * 65536) << source;
    EXPECT_EQ(j["counters"]["reconcile_mismatches"], 0) << source;
    EXPECT_EQ(j["budget"]["budget_chunks"], 5) << source;
    const auto& ss = j["source_stats"];
    EXPECT_EQ(ss["windows"], windows) << source;
    EXPECT_EQ(ss["submissions"], ss["completions"]) << source;
    EXPECT_EQ(ss["windows_free_at_close"], windows) << source;
    EXPECT_EQ(ss["tickets_outstanding_at_close"], 0) << source;
    EXPECT_TRUE(ss["allocation_counter_installed"].get<bool>()) << source;
    EXPECT_EQ(ss["dynamic_allocations"], 0) << source;
    EXPECT_GT(j["counters"]["exposed_source_wait_ns"].get<uint64_t>(), 0u) << source;
    EXPECT_EQ(j["plan"]["shutdown"], "ok") << source;
    EXPECT_TRUE(j["plan"]["balanced"].get<bool>()) << source;
    EXPECT_EQ(j["plan"]["reconcile_violations"], 0) << source << " " << j["plan"]["first_violation"];
    if (source == "uring") {
      EXPECT_GT(j["readahead"]["bundles"].get<uint64_t>(), 0u);
      EXPECT_GT(j["counters"]["prefetch_fills"].get<uint64_t>(), 0u);
    } else {
      EXPECT_EQ(ss["peak_depth"], 1) << source;
      EXPECT_EQ(j["counters"]["prefetch_fills"], 0) << source;
    }
  }
  // A blocking engine has one window.
  auto r = run([&] {
    auto a = scan_args("pager-declared", dir_.file("bad-windows"));
    a.insert(a.end(), {"--source", "direct", "--windows", "2"});
    return a;
  }(), errf_);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("one window"), std::string::npos) << r.err;
}

TEST_F(Cli, BadInputExitsTwoWithOneLine) {
  const std::vector<std::vector<std::string>> bad = {
      {"scan", "--bogus"},
      {"scan", "--region", dir_.file("missing.bin"), "--out", dir_.file("o1"), "--arm", "pager-lru",
       "--budget-bytes", "100000000"},
      {"scan", "--region", region_, "--out", dir_.file("o2"), "--arm", "pager-nope", "--budget-bytes", "1"},
      {"scan", "--region", region_, "--out", dir_.file("o3"), "--arm", "pager-lru", "--budget-bytes", "1000"},
      {"scan", "--region", region_, "--out", dir_.file("o4"), "--arm", "pager-lru"},
      {"scan", "--region", region_, "--out", dir_.file("o5"), "--arm", "pager-lru", "--budget-bytes",
       "100000000", "--chunk-size", "1000"},
      {"scan", "--region", region_, "--out", dir_.file("o6"), "--arm", "pager-lru", "--budget-bytes",
       "100000000", "--threads", "-3"},
      {"scan", "--region", region_, "--out", dir_.file("o8"), "--arm", "pager-lru", "--budget-bytes",
       "100000000", "--pager-nice", "20"},
      {"scan", "--region", region_, "--out", dir_.file("o9"), "--arm", "pager-lru", "--budget-bytes",
       "100000000", "--pager-nice", "high"},
      {"mkregion", "--out", dir_.file("x.bin"), "--size", "1000", "--seed", "1"},
      {},
  };
  for (const auto& args : bad) {
    auto r = run(args, errf_);
    std::string joined;
    for (auto& a : args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << joined << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("residctl: error: ", 0), 0u) << joined << "\n" << r.err;
  }
  for (const char* o : {"o1", "o2", "o3", "o4", "o5", "o6", "o8", "o9"}) EXPECT_FALSE(exists(dir_.file(o))) << o;
  // A region whose size is not a multiple of 4096.
  {
    std::ofstream f(dir_.file("odd.bin"), std::ios::binary);
    f << std::string(5000, 'x');
  }
  auto r = run({"scan", "--region", dir_.file("odd.bin"), "--out", dir_.file("o7"), "--arm", "kernel-mmap"}, errf_);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("multiple of 4096"), std::string::npos) << r.err;
}

// Whether this process holds CAP_SYS_NICE (bit 23 of CapEff in /proc/self/status).
bool has_cap_sys_nice() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> 23) & 1;
  return false;
}

// --pager-nice: the pager thread runs at the nice asked (or, without CAP_SYS_NICE for a
// value below the process's, keeps the process's and says why); `inherit` asks nothing; arm
// A has no pager thread.
TEST_F(Cli, ThePagerThreadRunsAtItsNice) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  errno = 0;
  const int own = ::getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  const int asked = std::max(own - 3, -20);
  const std::vector<std::tuple<std::string, std::string>> cases = {
      {"pager-declared", std::to_string(asked)}, {"pager-declared", "inherit"}, {"kernel-mmap", "5"}};
  for (const auto& [arm, nice] : cases) {
    const std::string out = dir_.file("nice-" + arm + nice);
    auto args = scan_args(arm, out);
    args.insert(args.end(), {"--pager-nice", nice});
    auto r = run(args, errf_);
    ASSERT_EQ(r.status, 0) << arm << " " << nice << ": " << r.err;
    const auto j = load(out + "/run.json");
    const auto& t = j["pager_thread"];
    if (arm == "kernel-mmap") {
      EXPECT_TRUE(t.is_null()) << t;
      continue;
    }
    if (nice == "inherit") {
      EXPECT_TRUE(j["config"]["pager_nice"].is_null());
      EXPECT_TRUE(t["nice_requested"].is_null());
      EXPECT_TRUE(t["nice_error"].is_null()) << t;
      EXPECT_EQ(t["nice"], own);
      continue;
    }
    EXPECT_EQ(j["config"]["pager_nice"], asked);
    EXPECT_EQ(t["nice_requested"], asked);
    if (t["nice_error"].is_null()) {
      EXPECT_EQ(t["nice"], asked) << t;
    } else {
      EXPECT_FALSE(has_cap_sys_nice()) << "refused a nice with CAP_SYS_NICE: " << t;
      EXPECT_EQ(t["nice"], own) << t;
    }
  }
}

class CliCorrupt : public Cli, public ::testing::WithParamInterface<std::string> {};

TEST_P(CliCorrupt, ByteFailsTheRun) {
  const std::string arm = GetParam();
  if (arm != "kernel-mmap")
    if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  // Flip one byte in chunk 5.
  const long off = 5 * 65536 + 1234;
  {
    FILE* f = std::fopen(region_.c_str(), "r+b");
    ASSERT_TRUE(f);
    std::fseek(f, off, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, off, SEEK_SET);
    std::fputc(c ^ 0x5a, f);
    std::fclose(f);
  }
  {
    const std::string out = dir_.file("bad-" + arm);
    auto r = run(scan_args(arm, out), errf_);
    EXPECT_EQ(r.status, 1) << arm << ": " << r.err;
    ASSERT_TRUE(exists(out + "/run.json")) << arm;
    const auto j = load(out + "/run.json");
    EXPECT_EQ(j["status"], "failed");
    ASSERT_TRUE(j["error"].is_string());
    EXPECT_NE(j["error"].get<std::string>().find("offset " + std::to_string(off)), std::string::npos) << j["error"];
    EXPECT_GT(j["counters"]["verify_errors"].get<int>(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Arms, CliCorrupt, ::testing::Values("kernel-mmap", "pager-declared"),
                         [](const auto& p) { return p.param == "kernel-mmap" ? std::string("A") : std::string("D"); });

TEST_F(Cli, ProbePrintsTheContractObject) {
  const std::string outf = dir_.file("probe.json");
  std::vector<std::string> args = {"probe", "--dir", dir_.path()};
  const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir_.file("probe.err"), outf);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = load(outf);
  EXPECT_EQ(j["schema_version"], 1);
  for (const char* k : {"kernel", "userfaultfd", "o_direct", "io_uring", "cgroup", "transparent_hugepage"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"syscall", "user_mode_only", "dev_userfaultfd", "unprivileged_sysctl", "missing",
                        "minor_shmem", "how"})
    EXPECT_TRUE(j["userfaultfd"].contains(k)) << k;
  EXPECT_EQ(j["kernel"]["page_size"], ::sysconf(_SC_PAGESIZE));
  if (j["o_direct"]["supported"].get<bool>()) {
    const int a = j["o_direct"]["min_alignment"].get<int>();
    EXPECT_TRUE(a == 512 || a == 4096) << a;
  }
}

// Every run directory ends with manifest.json: each file (but itself) with its size and
// sha256, so a later change to any of them is detectable.
TEST_F(Cli, TheRunDirectoryEndsWithItsManifest) {
  const std::string out = dir_.file("manifest-run");
  auto r = run(scan_args("kernel-mmap", out), errf_);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(exists(out + "/manifest.json"));
  const auto m = load(out + "/manifest.json");
  EXPECT_EQ(m["schema_version"], 1);
  std::vector<std::string> names;
  for (const auto& f : m["files"]) {
    const std::string name = f["name"];
    names.push_back(name);
    const std::string bytes = test::slurp(out + "/" + name);
    EXPECT_EQ(f["bytes"].get<uint64_t>(), bytes.size()) << name;
    EXPECT_EQ(f["sha256"], sha256_hex(bytes.data(), bytes.size())) << name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"run.json", "trace.bin"}));
}

// Content identity: `residctl inventory` digests the region chunk by chunk; a pager run given
// the digests checks every fill against them, and a byte changed after the inventory fails
// the run closed, naming the chunk, its extent and both digests, in every source engine.
class CliContent : public Cli, public ::testing::WithParamInterface<std::string> {};

TEST_P(CliContent, EveryFillIsCheckedAgainstTheInventory) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  const std::string source = GetParam();
  const std::string digests = dir_.file("digests.json");
  ASSERT_EQ(run({"inventory", "--file", region_, "--chunk-size", "65536", "--out", digests}, errf_).status, 0);
  const auto d = load(digests);
  EXPECT_EQ(d["chunks"].size(), 16u);
  EXPECT_EQ(d["bytes"], 16 * 65536);
  auto args = scan_args("pager-declared", dir_.file("clean-" + source));
  args[10] = std::to_string((source == "uring" ? 14 : 7) * 65536);  // F pays its eight windows
  const std::vector<std::string> more = {"--source", source, "--content-digests", digests};
  args.insert(args.end(), more.begin(), more.end());
  auto r = run(args, errf_);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = load(dir_.file("clean-" + source) + "/run.json");
  EXPECT_EQ(j["counters"]["content_checks"], j["counters"]["demand_fills"].get<uint64_t>() + j["counters"]["prefetch_fills"].get<uint64_t>());
  EXPECT_EQ(j["counters"]["content_mismatches"], 0);
  EXPECT_EQ(j["config"]["content_digests"], digests);
  {
    FILE* f = std::fopen(region_.c_str(), "r+b");  // chunk 9, after the inventory
    ASSERT_TRUE(f);
    std::fseek(f, 9 * 65536 + 77, SEEK_SET);
    std::fputc(0x5a ^ std::fgetc(f), f);
    std::fclose(f);
  }
  args[6] = dir_.file("flipped-" + source);
  r = run(args, errf_);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("rejected content-mismatch completion for chunk 9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[589824, +65536)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(d["chunks"][9].get<std::string>()), std::string::npos) << r.err;
  j = load(args[6] + "/run.json");
  EXPECT_EQ(j["rejection"]["kind"], "content-mismatch");
  EXPECT_EQ(j["rejection"]["bundle_chunks_published"], 0);
  EXPECT_EQ(j["counters"]["verify_errors"], 0);  // never published: the walk never saw the byte
}

INSTANTIATE_TEST_SUITE_P(Sources, CliContent, ::testing::Values("buffered", "direct", "uring"));

TEST_F(Cli, ContentDigestsOfAnotherGeometryAreBadInput) {
  const std::string digests = dir_.file("d32.json");
  ASSERT_EQ(run({"inventory", "--file", region_, "--chunk-size", "32768", "--out", digests}, errf_).status, 0);
  auto args = scan_args("pager-declared", dir_.file("bad-geometry"));
  args.insert(args.end(), {"--content-digests", digests});
  const auto r = run(args, errf_);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("was made for chunk size 32768"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(dir_.file("bad-geometry") + "/run.json"));
}

// trace.bin's access outcomes (step, chunk, miss) in order: what P5 compares (run-contract.md).
static std::vector<std::tuple<uint32_t, uint32_t, uint8_t>> access_outcomes(const std::string& trace) {
  const std::string raw = test::slurp(trace);
  std::vector<std::tuple<uint32_t, uint32_t, uint8_t>> out;
  for (size_t off = 32; off + 16 <= raw.size(); off += 16) {
    uint32_t step, chunk;
    std::memcpy(&step, raw.data() + off, 4);
    std::memcpy(&chunk, raw.data() + off + 4, 4);
    if (raw[off + 8] == 1) out.emplace_back(step, chunk, static_cast<uint8_t>(raw[off + 9] & 1));
  }
  return out;
}

// --sync none: every driver thread walks at its own pace (seeded jitter in its compute); the
// exact signal still delivers one signal per step in order, every byte is verified, and the
// access records are one per step.
TEST_F(Cli, FreeRunningDriversWithJitterVerifyEveryByte) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  for (std::string signal : {"all-threads-finished", "thread0-started"}) {
    const std::string out = dir_.file("free-" + signal);
    auto args = scan_args("pager-declared", out);
    args[16] = "3";  // --threads
    args.insert(args.end(), {"--sync", "none", "--jitter-us", "300", "--compute-us", "50", "--signal", signal});
    const auto r = run(args, errf_);
    ASSERT_EQ(r.status, 0) << signal << ": " << r.err;
    const auto j = load(out + "/run.json");
    EXPECT_EQ(j["config"]["sync"], "none");
    EXPECT_EQ(j["config"]["jitter_us"], 300);
    EXPECT_EQ(j["counters"]["accesses"], 32) << signal;
    EXPECT_EQ(j["counters"]["verify_errors"], 0) << signal;
    EXPECT_EQ(j["counters"]["bytes_verified"], 2 * 16 * 65536) << signal;
    EXPECT_EQ(j["counters"]["signals"], 32) << signal;
    EXPECT_EQ(j["trace"]["records"].get<uint64_t>() >= 32, true);
  }
}

// P5's exact half on free-running drivers: with the all-threads-finished signal, a thread
// that runs steps ahead has its faults decided at its own step's cursor, so the access
// outcomes are those of lockstep in every repetition, however far the jitter drives the
// threads apart (before: the declared policy evicted kept chunks at the lagging cursor).
// Negative control: the comparison tells LRU's outcomes from the declared policy's.
TEST_F(Cli, FreeRunningExactSignalGivesTheLockstepOutcomes) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  auto scan = [&](const std::string& arm, const std::string& sync, const std::string& name) {
    auto args = scan_args(arm, dir_.file(name));
    args[10] = std::to_string(11 * 65536);  // --budget-bytes: 9 chunks, a kept set to lose
    args[16] = "3";                          // --threads
    args[14] = "4";                          // --passes
    args.insert(args.end(), {"--sync", sync, "--jitter-us", "3000", "--signal", "all-threads-finished"});
    const auto r = run(args, errf_);
    EXPECT_EQ(r.status, 0) << name << ": " << r.err;
    return access_outcomes(dir_.file(name) + "/trace.bin");
  };
  const auto lockstep = scan("pager-declared", "step", "lockstep");
  ASSERT_EQ(lockstep.size(), 64u);
  for (int rep = 0; rep < 3; ++rep)
    EXPECT_EQ(scan("pager-declared", "none", "free" + std::to_string(rep)), lockstep) << "repetition " << rep;
  EXPECT_NE(scan("pager-lru", "step", "lru"), lockstep);
}
