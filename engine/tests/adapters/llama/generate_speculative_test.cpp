// `residctl generate --draft` (C4): greedy speculative decoding with the target served by the
// pager. On the fixture's llama model quantized to Q4_1 with its Q4_0 variant as the draft, and with
// a byte copy of the target as the draft (every proposal agrees): the committed tokens and
// every logit row equal plain greedy decoding's, the round accounting adds up, and a draft
// that agrees always takes the fewest traversals the draft length allows.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/test_util.hpp"

using namespace resid;

namespace {

constexpr uint32_t kTokens = 12;
constexpr uint32_t kDraftMax = 4;

using GenRun = test::RunOut;

GenRun generate(const test::TempDir& dir, const std::string& model, const std::string& name,
                const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"generate", "--model", model, "--arm", "pager-declared", "--budget-bytes", "1500000",
                                   "--chunk-size", "65536", "--source", "uring", "--windows", "4", "--prompt",
                                   "the quick brown fox jumps", "--tokens", std::to_string(kTokens), "--ctx", "64",
                                   "--threads", "2", "--watchdog-s", "60"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::run_to(RESIDCTL_PATH, args, dir.file(name));
}

// The pinned llama.cpp's quantizer (residctl quantize), --pure: one file type throughout.
void quantize(const test::TempDir& dir, const std::string& in, const std::string& out, const std::string& type) {
  const auto s = test::spawn_capture(RESIDCTL_PATH, {"quantize", "--in", in, "--out", out, "--type", type, "--pure"},
                                     dir.file(type + ".stderr"));
  ASSERT_EQ(s.status, 0) << s.err;
}

// The target is Q4_1 (as SmolLM2): its CPU kernel computes a row the same whether the batch
// holds one token or several, so a verification's rows can equal single-token decoding's.
// (An f16 target's batched rows differ in the last bits here: the record measures it.)
class Speculative : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string f16 = std::string(RESID_TEST_MODELS) + "/llama-dense-tied-f16.gguf";
    if (!test::exists(f16)) GTEST_SKIP() << "no test model " << f16 << " (run the llama_test_models ctest fixture)";
    if (auto u = test::uffd_unavailable()) GTEST_SKIP() << *u;
    target_ = dir_.file("target-q4_1.gguf");
    draft_ = dir_.file("draft-q4_0.gguf");
    quantize(dir_, f16, target_, "q4_1");
    quantize(dir_, f16, draft_, "q4_0");
    greedy_ = generate(dir_, target_, "greedy", {});
    ASSERT_EQ(greedy_.status, 0) << greedy_.err;
  }
  // The speculative run equals the greedy one: tokens, every logit row; its rounds add up.
  void expect_exact(const GenRun& r) const {
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(test::slurp(r.out + "/tokens.json"), test::slurp(greedy_.out + "/tokens.json"));
    EXPECT_TRUE(test::slurp(r.out + "/logits.f32") == test::slurp(greedy_.out + "/logits.f32")) << "logit rows differ";
    EXPECT_EQ(test::slurp(r.out + "/logits.sha256"), test::slurp(greedy_.out + "/logits.sha256"));
    const auto& s = r.j["speculative"];
    const uint64_t t = s["traversals"], accepted = s["accepted"], drafted = s["drafted"];
    EXPECT_EQ(t + accepted, kTokens - 1) << s.dump();  // each traversal commits its agreed tokens and one more
    EXPECT_LE(accepted, drafted);
    EXPECT_EQ(s["rows_traversed"].get<uint64_t>(), t + drafted);
    EXPECT_EQ(r.j["generation"]["passes"].get<uint64_t>(), t + 1);  // and the prefill
    EXPECT_TRUE(r.j["plan"]["balanced"].get<bool>()) << r.j["plan"].dump();
  }
  test::TempDir dir_;
  std::string target_, draft_;
  GenRun greedy_;
};

}  // namespace

TEST_F(Speculative, QuantizedDraftCommitsTheTargetsGreedyOutputs) {
  const GenRun r = generate(dir_, target_, "spec", {"--draft", draft_, "--draft-max", std::to_string(kDraftMax)});
  expect_exact(r);
  EXPECT_EQ(greedy_.j["speculative"], nullptr);
}

// A byte copy of the target proposes exactly what the target commits: every group is taken
// whole, so the 11 decode outputs take ceil(11 / 5) = 3 traversals, and fewer weight bytes
// are read than by one traversal per token.
TEST_F(Speculative, AgreeingDraftTakesTheFewestTraversals) {
  const std::string copy = dir_.file("copy.gguf");
  std::filesystem::copy_file(target_, copy);
  const GenRun r = generate(dir_, target_, "self", {"--draft", copy, "--draft-max", std::to_string(kDraftMax)});
  expect_exact(r);
  const auto& s = r.j["speculative"];
  EXPECT_EQ(s["traversals"], (kTokens - 1 + kDraftMax) / (kDraftMax + 1));
  EXPECT_EQ(s["accepted"], s["drafted"]);
  EXPECT_LT(r.j["counters"]["physical_bytes_read"].get<uint64_t>(),
            greedy_.j["counters"]["physical_bytes_read"].get<uint64_t>());
}

TEST_F(Speculative, TheTargetsOwnFileIsRefusedAsADraft) {
  const GenRun r = generate(dir_, target_, "same", {"--draft", target_});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--draft is the target's own file"), std::string::npos) << r.err;
}
