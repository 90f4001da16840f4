// `residctl generate`'s driver cells (held-consumer, reset-outstanding, shutdown-live-consumer)
// and --warm-request (C12), on the tiny test models of the llama_test_models fixture: each
// cell fires, the generation stays byte-identical to the run without it, the run closes
// clean, and run.json's fault / requests fields carry what the pipeline's validators read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/sha256.hpp"
#include "util/test_util.hpp"

using namespace resid;

namespace {

constexpr uint64_t kChunk = 16 << 10;
constexpr uint64_t kBudget = 500000;  // 22 chunks beside the eight windows: the tiny models page

// The tiny model, or "" with the reason to skip in *why.
std::string tiny_model(const std::string& variant, std::string* why) {
  const std::string p = std::string(RESID_TEST_MODELS) + "/tiny-" + variant + ".gguf";
  if (test::exists(p)) return p;
  *why = "no test model at " + p + " (run the llama_test_models ctest fixture)";
  return {};
}

using GenRun = test::RunOut;

// One pager run (uring, eight windows, eager reconcile) with the extra flags.
GenRun generate(const test::TempDir& dir, const std::string& model, const std::string& name, const std::string& arm,
             uint64_t budget, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"generate", "--model", model, "--arm", arm, "--budget-bytes", std::to_string(budget),
                                   "--chunk-size", std::to_string(kChunk), "--source", "uring", "--windows", "8",
                                   "--prompt", "the quick brown fox jumps", "--tokens", "6", "--ctx", "64",
                                   "--threads", "2", "--eager-reconcile", "--watchdog-s", "60"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::run_to(RESIDCTL_PATH, args, dir.file(name));
}

// The generation equals the reference run's, and the Plan closed clean.
void expect_exact_and_clean(const GenRun& r, const GenRun& ref, const std::string& what) {
  ASSERT_EQ(r.status, 0) << what << ": " << r.err;
  EXPECT_EQ(r.j["status"], "ok") << what << ": " << r.j["error"];
  EXPECT_EQ(test::slurp(r.out + "/tokens.json"), test::slurp(ref.out + "/tokens.json")) << what;
  EXPECT_TRUE(test::slurp(r.out + "/logits.f32") == test::slurp(ref.out + "/logits.f32")) << what << ": logits differ";
  const auto& p = r.j["plan"];
  EXPECT_EQ(p["shutdown"], "ok") << what;
  EXPECT_TRUE(p["balanced"].get<bool>()) << what << " " << p.dump();
  EXPECT_TRUE(p["tickets"]["balanced"].get<bool>()) << what;
  EXPECT_TRUE(p["consumers"]["balanced"].get<bool>()) << what;
  EXPECT_EQ(p["windows_free_at_close"], p["windows"]) << what;
  EXPECT_EQ(p["reconcile_violations"], 0) << what << " " << p["first_violation"];
  EXPECT_EQ(r.j["counters"]["reconcile_mismatches"], 0) << what;
  EXPECT_EQ(r.j["fault"]["class"], "recoverable") << what;
  EXPECT_TRUE(r.j["fault"]["fired"].get<bool>()) << what;
}

uint64_t consumers_live_refusals(const nlohmann::json& j) { return j["plan"]["refusals"].value("consumers-live", 0); }

// Each cell against the same model's run without it (pager-zero, uring, eight windows).
class DriverCells : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    model_ = tiny_model(GetParam(), &why);
    if (model_.empty()) GTEST_SKIP() << why;
    if (auto u = test::uffd_unavailable()) GTEST_SKIP() << *u;
    ref_ = generate(dir_, model_, "ref", "pager-zero", kBudget, {});
    ASSERT_EQ(ref_.status, 0) << ref_.err;
  }
  GenRun with_cell(const std::string& name, const std::string& cell) const {
    return generate(dir_, model_, name, "pager-zero", kBudget, {"--fault", cell});
  }
  test::TempDir dir_;
  std::string model_;
  GenRun ref_;
};

}  // namespace

// held-consumer: the extra consumer outlives its step by one step; every reuse the driver
// asks of the Plan meanwhile is refused, and the driver's count is the Plan's own (its
// consumers-live refusals and the pager's refused recycles), which the run without the cell
// does not have.
TEST_P(DriverCells, HeldConsumerDelaysReuseAndRecoversExactly) {
  const GenRun& ref = ref_;
  EXPECT_EQ(consumers_live_refusals(ref.j), 0u);
  EXPECT_EQ(ref.j["plan"]["recycle_refusals"], 0);
  const GenRun r = with_cell("held", "held-consumer@2");
  expect_exact_and_clean(r, ref, "held-consumer");
  const auto& f = r.j["fault"];
  EXPECT_EQ(f["cell"], "held-consumer");
  EXPECT_TRUE(f["held_chunk"].is_number_integer());
  EXPECT_GE(f["held_step"].get<uint64_t>(), 2u);
  EXPECT_EQ(f["held_steps"], 1);
  EXPECT_GE(f["reuse_refusals"].get<uint64_t>(), 1u);
  EXPECT_EQ(f["reuse_refusals"], f["reuse_attempts"]);
  EXPECT_TRUE(f["released"].get<bool>());
  EXPECT_EQ(f["reuse_refusals"].get<uint64_t>(), consumers_live_refusals(r.j));
  EXPECT_EQ(f["reuse_refusals"], r.j["plan"]["recycle_refusals"]);
  EXPECT_EQ(f["reuse_refusals"], r.j["counters"]["plan_recycle_refusals"]);
}

// reset-outstanding: the Plan is reset with reads in flight; they come back StaleEpoch and
// are discarded, nothing of the old epoch is published, and the chunks are read again.
TEST_P(DriverCells, ResetWithReadsOutstandingDiscardsThemAndRecoversExactly) {
  const GenRun& ref = ref_;
  EXPECT_EQ(ref.j["plan"]["resets"], 0);
  EXPECT_EQ(ref.j["plan"]["tickets"]["invalidated"], 0);
  const GenRun r = with_cell("reset", "reset-outstanding@3");
  expect_exact_and_clean(r, ref, "reset-outstanding");
  const auto& f = r.j["fault"];
  const auto& p = r.j["plan"];
  EXPECT_EQ(f["cell"], "reset-outstanding");
  EXPECT_GE(f["read"].get<uint64_t>(), 3u);
  EXPECT_GE(f["outstanding_at_reset"].get<uint64_t>(), 2u);  // inside a bundle, uring depth 8
  EXPECT_GE(f["discarded"].get<uint64_t>(), 1u);
  EXPECT_EQ(f["discarded"], p["tickets"]["invalidated"]);
  EXPECT_EQ(f["stale_published"], 0);
  EXPECT_EQ(p["resets"], 1);
  EXPECT_EQ(p["epoch"], 2);
  EXPECT_EQ(p["tickets"]["issued"].get<uint64_t>(),
            p["tickets"]["copied"].get<uint64_t>() + p["tickets"]["invalidated"].get<uint64_t>());
  EXPECT_EQ(p["bundles_failed"], 0);
}

// shutdown-live-consumer: after the last token the Plan refuses to shut down under a held
// chunk (consumers-live); released, the real shutdown is ok.
TEST_P(DriverCells, ShutdownUnderALiveConsumerIsRefusedThenSucceeds) {
  const GenRun& ref = ref_;
  EXPECT_EQ(ref.j["plan"]["shutdown_refusals"], 0);
  const GenRun r = with_cell("shut", "shutdown-live-consumer");
  expect_exact_and_clean(r, ref, "shutdown-live-consumer");
  EXPECT_EQ(r.j["fault"]["shutdown_refusal"], "consumers-live");
  EXPECT_TRUE(r.j["fault"]["held_chunk"].is_number_integer());
  EXPECT_EQ(r.j["plan"]["shutdown_refusals"], 1);
  EXPECT_EQ(consumers_live_refusals(r.j), 1u);
}

INSTANTIATE_TEST_SUITE_P(Models, DriverCells, ::testing::Values(std::string("dense"), std::string("moe")));

// A cell with no eligible point fails the run in one line (as the source cells do); a driver
// cell on kernel-mmap or --warm-request where it cannot apply is bad input (exit 2, one line).
TEST(DriverCellsInput, CannotFireFailsAndBadInputIsOneLine) {
  std::string why;
  const std::string model = tiny_model("dense", &why);
  if (model.empty()) GTEST_SKIP() << why;
  if (auto u = test::uffd_unavailable()) GTEST_SKIP() << *u;
  test::TempDir dir;
  for (const std::string cell : {"held-consumer@1000000", "reset-outstanding@1000000"}) {
    const GenRun r = generate(dir, model, "late", "pager-zero", kBudget, {"--fault", cell});
    EXPECT_EQ(r.status, 1) << cell << ": " << r.err;
    EXPECT_EQ(test::count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("did not fire (no eligible point at or after 1000000)"), std::string::npos) << r.err;
    EXPECT_FALSE(r.j["fault"]["fired"].get<bool>()) << cell;
  }
  const std::vector<std::vector<std::string>> bad = {{"--arm", "kernel-mmap", "--fault", "held-consumer@0"},
                                                     {"--arm", "kernel-mmap", "--warm-request"},
                                                     {"--arm", "pager-lru", "--warm-request", "--fault", "held-consumer@0"},
                                                     {"--arm", "pager-lru", "--warm-request", "--calibrate"}};
  for (const auto& extra : bad) {
    std::vector<std::string> args = {"generate", "--model", model, "--out", dir.file("bad"), "--prompt", "x",
                                     "--tokens", "2", "--ctx", "64", "--budget-bytes", std::to_string(kBudget)};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto s = test::spawn_capture(RESIDCTL_PATH, args, dir.file("bad.stderr"));
    EXPECT_EQ(s.status, 2) << extra[1] << " " << extra[2] << ": " << s.err;
    EXPECT_EQ(test::count_lines(s.err), 1u) << s.err;
  }
}

namespace {

void expect_warm_equals_primary(const GenRun& r, const std::string& what) {
  ASSERT_EQ(r.status, 0) << what << ": " << r.err;
  ASSERT_EQ(r.j["status"], "ok") << what << ": " << r.j["error"];
  const auto& q = r.j["requests"];
  ASSERT_EQ(q.size(), 2u) << what;
  EXPECT_EQ(q[0]["kind"], "primary") << what;
  EXPECT_EQ(q[1]["kind"], "warm") << what;
  EXPECT_EQ(q[0]["tokens"], q[1]["tokens"]) << what;
  EXPECT_EQ(q[0]["tokens_sha256"], q[1]["tokens_sha256"]) << what;
  EXPECT_EQ(q[0]["logits_sha256"], q[1]["logits_sha256"]) << what;
  // The primary's hashes are those of the run directory's files.
  EXPECT_EQ(q[0]["tokens"], test::load_json(r.out + "/tokens.json")["tokens"]) << what;
  EXPECT_EQ(q[0]["tokens_sha256"], sha256_file(r.out + "/tokens.json")) << what;
  EXPECT_EQ(q[0]["logits_sha256"], sha256_file(r.out + "/logits.sha256")) << what;
  const auto& p = r.j["plan"];
  EXPECT_EQ(p["resets"], 2) << what;
  EXPECT_EQ(p["epoch"], 3) << what;
  EXPECT_EQ(p["shutdown"], "ok") << what;
  EXPECT_TRUE(p["balanced"].get<bool>()) << what << " " << p.dump();
  EXPECT_TRUE(p["tickets"]["balanced"].get<bool>()) << what;
  EXPECT_TRUE(p["consumers"]["balanced"].get<bool>()) << what;
  EXPECT_EQ(p["slots_vacant_at_close"], p["slots"]) << what;
  EXPECT_EQ(p["windows_free_at_close"], p["windows"]) << what;
  EXPECT_GT(q[0]["misses"].get<uint64_t>(), 0u) << what;
}

}  // namespace

// C12: primary -> reset -> warm -> reset -> shutdown in one process. The warm request's
// tokens and logits equal the primary's; with LRU at a budget holding the model it reads
// less (its chunks stayed resident across the reset); pager-zero reads everything again.
TEST(WarmRequest, WarmEqualsPrimaryAndReusesResidentChunks) {
  std::string why;
  const std::string model = tiny_model("moe", &why);
  if (model.empty()) GTEST_SKIP() << why;
  if (auto u = test::uffd_unavailable()) GTEST_SKIP() << *u;
  test::TempDir dir;
  const GenRun ref = generate(dir, model, "ref", "pager-lru", 4000000, {});
  ASSERT_EQ(ref.status, 0) << ref.err;
  const GenRun lru = generate(dir, model, "lru", "pager-lru", 4000000, {"--warm-request"});
  expect_warm_equals_primary(lru, "lru");
  EXPECT_EQ(test::slurp(lru.out + "/tokens.json"), test::slurp(ref.out + "/tokens.json"));
  EXPECT_TRUE(test::slurp(lru.out + "/logits.f32") == test::slurp(ref.out + "/logits.f32"));
  const auto& q = lru.j["requests"];
  EXPECT_LT(q[1]["physical_bytes_read"].get<uint64_t>(), q[0]["physical_bytes_read"].get<uint64_t>());
  EXPECT_LT(q[1]["misses"].get<uint64_t>(), q[0]["misses"].get<uint64_t>());
  EXPECT_TRUE(ref.j["requests"].is_null());
  const GenRun zero = generate(dir, model, "zero", "pager-zero", kBudget, {"--warm-request"});
  expect_warm_equals_primary(zero, "zero");
}

// pager-lru-k (lru_k_per_layer, C7's per-layer LRU): at a budget below the model it is exact
// (tokens and every logit row equal kernel-mmap's), closes clean, records the arm and K, and
// reads fewer bytes than pager-zero (the last K chunks of each layer survive a pass); plain
// LRU on the same cyclic passes keeps nothing either. The flag's own errors are one line, exit 2.
class LruK : public ::testing::TestWithParam<std::string> {};

TEST_P(LruK, ExactBelowTheModelAndReadsLessThanZero) {
  std::string why;
  const std::string model = tiny_model(GetParam(), &why);
  if (model.empty()) GTEST_SKIP() << why;
  if (auto u = test::uffd_unavailable()) GTEST_SKIP() << *u;
  test::TempDir dir;
  const std::string oracle = dir.file("mmap");
  const auto s = test::spawn_capture(RESIDCTL_PATH,
                                     {"generate", "--model", model, "--out", oracle, "--arm", "kernel-mmap", "--prompt",
                                      "the quick brown fox jumps", "--tokens", "6", "--ctx", "64", "--threads", "2",
                                      "--chunk-size", std::to_string(kChunk)},
                                     dir.file("mmap.stderr"));
  ASSERT_EQ(s.status, 0) << s.err;
  const GenRun zero = generate(dir, model, "zero", "pager-zero", kBudget, {});
  const GenRun lruk = generate(dir, model, "lruk", "pager-lru-k", kBudget, {"--lru-k", "3"});
  for (const GenRun* r : {&zero, &lruk}) {
    ASSERT_EQ(r->status, 0) << r->err;
    ASSERT_EQ(r->j["status"], "ok") << r->j["error"];
    EXPECT_EQ(test::slurp(r->out + "/tokens.json"), test::slurp(oracle + "/tokens.json")) << r->out;
    EXPECT_TRUE(test::slurp(r->out + "/logits.f32") == test::slurp(oracle + "/logits.f32")) << r->out << ": logits differ";
    EXPECT_LT(r->j["budget"]["budget_chunks"].get<uint64_t>(), r->j["region"]["chunks"].get<uint64_t>()) << r->out;
    EXPECT_EQ(r->j["counters"]["reconcile_mismatches"], 0) << r->out;
    EXPECT_TRUE(r->j["plan"]["balanced"].get<bool>()) << r->out;
  }
  EXPECT_EQ(lruk.j["arm"], "pager-lru-k");
  EXPECT_EQ(lruk.j["policy"], "lru_k_per_layer");
  EXPECT_EQ(lruk.j["policy_k"], 3);
  EXPECT_EQ(lruk.j["config"]["arm"], "pager-lru-k");
  EXPECT_EQ(lruk.j["config"]["lru_k"], 3);
  EXPECT_TRUE(zero.j["config"]["lru_k"].is_null());
  EXPECT_TRUE(zero.j["policy_k"].is_null());
  EXPECT_LT(lruk.j["counters"]["physical_bytes_read"].get<uint64_t>(),
            zero.j["counters"]["physical_bytes_read"].get<uint64_t>());
  // Not the misses: a step's access misses when any of its chunks is absent, and on the MoE
  // with two compute threads every step can still miss one (232 and 232 seen): the bytes
  // read are what the cache saves.

  const std::string budget = std::to_string(kBudget), out = dir.file("bad");
  const std::vector<std::string> gen = {"generate", "--model", model, "--out", out, "--prompt", "x", "--budget-bytes", budget};
  const std::vector<std::vector<std::string>> bad = {{"--arm", "pager-lru-k"},
                                                     {"--arm", "pager-zero", "--lru-k", "2"},
                                                     {"--arm", "pager-lru-k", "--lru-k", "0"}};
  std::vector<std::vector<std::string>> runs = {{"scan", "--region", model, "--out", out, "--arm", "pager-lru-k", "--budget-bytes", budget}};
  for (const auto& extra : bad) {
    runs.push_back(gen);
    runs.back().insert(runs.back().end(), extra.begin(), extra.end());
  }
  for (const auto& args : runs) {
    const auto b = test::spawn_capture(RESIDCTL_PATH, args, dir.file("bad.stderr"));
    EXPECT_EQ(b.status, 2) << b.err;
    EXPECT_EQ(test::count_lines(b.err), 1u) << b.err;
    EXPECT_NE(b.err.find("lru-k"), std::string::npos) << b.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LruK, ::testing::Values(std::string("dense"), std::string("moe")));
