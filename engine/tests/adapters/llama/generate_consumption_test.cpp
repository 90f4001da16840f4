// `residctl generate --consumption tensor` on the fixture's tiny models: a discovery pass
// learns each tensor's release node, later passes let a chunk go inside its step once every
// tensor over it has been read for the last time, and the generation stays byte-identical to
// the object-granular run's (the same model, arm and budget). The learned plan carries the
// release nodes and the read order; a plan without them is refused for a tensor run.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/test_util.hpp"

using namespace resid;

namespace {

constexpr uint64_t kChunk = 16 << 10;  // finer than the tiny models' tensors: chunks can go early
constexpr uint64_t kBudget = 500000;

using GenRun = test::RunOut;

GenRun generate(const test::TempDir& dir, const std::string& model, const std::string& name,
                const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"generate", "--model", model, "--arm", "pager-declared", "--budget-bytes",
                                   std::to_string(kBudget), "--chunk-size", std::to_string(kChunk), "--source",
                                   "direct", "--prompt", "the quick brown fox jumps", "--tokens", "6", "--ctx", "64",
                                   "--threads", "2", "--eager-reconcile", "--watchdog-s", "60"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::run_to(RESIDCTL_PATH, args, dir.file(name));
}

class Consumption : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = std::string(RESID_TEST_MODELS) + "/tiny-" + GetParam() + ".gguf";
    if (!test::exists(model_)) GTEST_SKIP() << "no test model " << model_ << " (run the llama_test_models ctest fixture)";
    if (auto u = test::uffd_unavailable()) GTEST_SKIP() << *u;
  }
  test::TempDir dir_;
  std::string model_;
};

TEST_P(Consumption, TensorSignalsLetChunksGoEarlyAndChangeNoOutput) {
  const std::string plan = dir_.file("plan.json");
  const GenRun obj = generate(dir_, model_, "object", {"--consumption", "object"});
  const GenRun ten = generate(dir_, model_, "tensor", {"--consumption", "tensor", "--graph-plan-out", plan});
  ASSERT_EQ(obj.status, 0) << obj.err;
  ASSERT_EQ(ten.status, 0) << ten.err;
  EXPECT_EQ(test::slurp(ten.out + "/tokens.json"), test::slurp(obj.out + "/tokens.json"));
  EXPECT_TRUE(test::slurp(ten.out + "/logits.f32") == test::slurp(obj.out + "/logits.f32")) << "logits differ";

  const auto& so = obj.j["signal_audit"];
  const auto& st = ten.j["signal_audit"];
  EXPECT_EQ(so["consumption"], "object");
  EXPECT_EQ(so["releases"], 0);
  EXPECT_EQ(so["chunks_let_go_early"], 0);
  EXPECT_EQ(st["consumption"], "tensor");
  EXPECT_GT(st["releases"].get<uint64_t>(), 0u);
  EXPECT_GT(st["chunks_let_go_early"].get<uint64_t>(), 0u);
  EXPECT_EQ(st["reads_after_release"], 0);
  EXPECT_EQ(st["foreign_reads"], 0);
  EXPECT_EQ(st["chunks_let_go_early"], ten.j["counters"]["consumed_early"]);
  // Consumers balance: every chunk entered was let go once, early or at its step's end.
  EXPECT_TRUE(ten.j["plan"]["consumers"]["balanced"].get<bool>()) << ten.j["plan"].dump();
  EXPECT_EQ(ten.j["plan"]["reconcile_violations"], 0);

  const auto p = test::load_json(plan);
  ASSERT_EQ(p["shapes"].size(), 2u);  // the prefill's and the decode's
  for (const auto& s : p["shapes"]) {
    ASSERT_TRUE(s.contains("releases"));
    ASSERT_TRUE(s.contains("read_order"));
    EXPECT_GT(s["releases"].size(), 0u);
    EXPECT_GE(s["read_order"].size(), s["releases"].size());
    for (const auto& r : s["releases"]) EXPECT_NE(r["object"], "embd");
  }
}

TEST_P(Consumption, APlanWithoutReleaseNodesIsRefusedForATensorRun) {
  const std::string plan = dir_.file("object-plan.json");
  const GenRun learn = generate(dir_, model_, "learn", {"--graph-plan-out", plan});
  ASSERT_EQ(learn.status, 0) << learn.err;
  const GenRun r = generate(dir_, model_, "refused", {"--consumption", "tensor", "--graph-plan", plan});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("no release nodes"), std::string::npos) << r.err;

  // A release plan reused as given: no discovery pass, the same early releases.
  const std::string tplan = dir_.file("tensor-plan.json");
  const GenRun t1 = generate(dir_, model_, "t1", {"--consumption", "tensor", "--graph-plan-out", tplan});
  ASSERT_EQ(t1.status, 0) << t1.err;
  const GenRun t2 = generate(dir_, model_, "t2", {"--consumption", "tensor", "--graph-plan", tplan});
  ASSERT_EQ(t2.status, 0) << t2.err;
  EXPECT_EQ(t2.j["signal_audit"]["discovery_passes"], 0);
  EXPECT_GT(t2.j["signal_audit"]["releases"].get<uint64_t>(), t1.j["signal_audit"]["releases"].get<uint64_t>());
  EXPECT_EQ(test::slurp(t2.out + "/tokens.json"), test::slurp(t1.out + "/tokens.json"));
}

TEST_P(Consumption, AReleaseNodeThatIsNotTheLastReaderFailsTheRun) {
  const std::string plan = dir_.file("plan.json");
  const GenRun t1 = generate(dir_, model_, "t1", {"--consumption", "tensor", "--graph-plan-out", plan});
  ASSERT_EQ(t1.status, 0) << t1.err;
  // Every object's last release node moved to its first: its tensors are then read again.
  auto bad = test::load_json(plan);
  for (auto& s : bad["shapes"]) {
    auto& rs = s["releases"];
    for (size_t i = 1; i < rs.size(); ++i)
      if (rs[i]["object"] == rs[i - 1]["object"]) {
        rs[i - 1]["tensors"].insert(rs[i - 1]["tensors"].end(), rs[i]["tensors"].begin(), rs[i]["tensors"].end());
        rs[i]["tensors"] = nlohmann::json::array();
      }
  }
  const std::string bad_plan = dir_.file("bad-plan.json");
  std::ofstream(bad_plan) << bad.dump();
  const GenRun r = generate(dir_, model_, "bad", {"--consumption", "tensor", "--graph-plan", bad_plan});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("after their tensor's release"), std::string::npos) << r.err;
  EXPECT_FALSE(test::exists(r.out + "/tokens.json"));
}

INSTANTIATE_TEST_SUITE_P(Models, Consumption, ::testing::Values(std::string("dense"), std::string("moe")));

}  // namespace
