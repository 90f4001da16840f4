// The fault decorator (source/fault.hpp): every source cell fires at its read on every engine
// it applies to, with the completion the cell names; the others pass through untouched.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/alloc_count.hpp"
#include "core/errors.hpp"
#include "source/fault.hpp"
#include "util/test_util.hpp"

using namespace resid;

namespace {

constexpr uint64_t kSeed = 3;
constexpr uint64_t kFile = 2u << 20;
constexpr uint64_t kRead = 65536;

struct Engine {
  SourceEngine engine;
  size_t windows;
  std::string name;
};

void PrintTo(const Engine& e, std::ostream* os) { *os << e.name; }

class Faults : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    path_ = dir_.file("region.bin");
    test::write_pattern_file(path_, kFile, kSeed);
  }
  FaultySourceHandle open(FaultCell cell, uint64_t at) {
    SourceOptions o;
    o.windows = GetParam().windows;
    return with_fault(open_source(GetParam().engine, path_, 256u << 10, o), FaultSpec{cell, at});
  }
  // Six reads one at a time (read i at offset i * kRead, tag 100 + i); the completions.
  std::vector<Completion> run_six(Source& src) {
    std::vector<Completion> out;
    for (uint64_t i = 0; i < 6; ++i) {
      EXPECT_TRUE(src.submit(Extent{i * kRead, kRead}, 100 + i));
      auto c = src.reap(true);
      EXPECT_TRUE(c.has_value());
      if (!c) break;
      out.push_back(*c);
      src.release(*c);
    }
    return out;
  }
  test::TempDir dir_;
  std::string path_;
};

}  // namespace

TEST_P(Faults, EachSourceCellFiresAtItsRead) {
  struct Want {
    FaultCell cell;
    RejectReason reason;
  };
  for (Want w : {Want{FaultCell::ShortRead, RejectReason::ShortRead}, Want{FaultCell::Eio, RejectReason::Failed},
                 Want{FaultCell::StaleCompletion, RejectReason::None}, Want{FaultCell::WrongObject, RejectReason::None}}) {
    const std::string what = std::string(to_string(w.cell)) + " on " + GetParam().name;
    auto h = open(w.cell, 3);
    const auto cs = run_six(*h.source);
    ASSERT_EQ(cs.size(), 6u) << what;
    for (uint64_t i = 0; i < 6; ++i) {
      const Completion& c = cs[i];
      if (i != 3) {
        EXPECT_TRUE(c.ok()) << what << " read " << i << ": " << c.error;
        EXPECT_EQ(c.tag, 100 + i) << what;
        EXPECT_EQ(c.extent.offset, i * kRead) << what;
        continue;
      }
      EXPECT_EQ(c.reason, w.reason) << what;
      if (w.cell == FaultCell::ShortRead || w.cell == FaultCell::Eio) {
        EXPECT_FALSE(c.ok()) << what;
        EXPECT_EQ(c.data, nullptr) << what;
        EXPECT_EQ(c.extent.offset, 3 * kRead) << what;  // the extent asked for
        EXPECT_EQ(c.extent.length, kRead) << what;
      }
      // One read at a time: the window's previous read was read 2.
      if (w.cell == FaultCell::StaleCompletion) {
        EXPECT_EQ(c.tag, 102u) << what;
      }
      if (w.cell == FaultCell::WrongObject) {
        EXPECT_EQ(c.extent.offset, 0u) << what;  // the first read's bytes
      }
    }
    ASSERT_TRUE(h.report) << what;
    EXPECT_TRUE(h.report->fired) << what;
    EXPECT_EQ(h.report->read, 3u) << what;
    EXPECT_EQ(h.report->tag, 103u) << what;
    EXPECT_EQ(h.source->windows_free(), GetParam().windows) << what;
  }
}

TEST_P(Faults, BundleExtentFailureHitsTheLastReadOfTheFirstBundleOfTwoOrMore) {
  auto h = open(FaultCell::BundleExtentFailure, 0);
  Source& s = *h.source;
  s.begin_bundle(1);  // a bundle of one read is not eligible
  ASSERT_TRUE(s.submit(Extent{0, kRead}, 1));
  auto c = s.reap(true);
  ASSERT_TRUE(c && c->ok());
  s.release(*c);
  s.begin_bundle(2);
  for (uint64_t i = 1; i <= 2; ++i) {
    ASSERT_TRUE(s.submit(Extent{i * kRead, kRead}, 1 + i));
    c = s.reap(true);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->ok(), i == 1) << i;
    if (i == 2) {
      EXPECT_EQ(c->reason, RejectReason::Failed);
    }
    s.release(*c);
  }
  EXPECT_TRUE(h.report->fired);
  EXPECT_EQ(h.report->read, 2u);
}

TEST_P(Faults, StallWithholdsEveryCompletionUntilTheDrain) {
  auto h = open(FaultCell::Stall, 1);
  Source& s = *h.source;
  ASSERT_TRUE(s.submit(Extent{0, kRead}, 1));
  auto c = s.reap(true);
  ASSERT_TRUE(c && c->ok());  // before the stall
  s.release(*c);
  ASSERT_TRUE(s.submit(Extent{kRead, kRead}, 2));
  EXPECT_FALSE(s.reap(true).has_value());  // the storage stopped answering
  EXPECT_FALSE(s.reap(false).has_value());
  EXPECT_EQ(s.inflight(), 1u);
  EXPECT_TRUE(h.report->fired);
  s.drain();  // it answers at last
  c = s.reap(false);
  ASSERT_TRUE(c && c->ok());
  EXPECT_EQ(c->tag, 2u);
  s.release(*c);
  EXPECT_EQ(s.inflight(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Engines, Faults,
                         ::testing::Values(Engine{SourceEngine::Buffered, 1, "buffered"},
                                           Engine{SourceEngine::Direct, 1, "direct"},
                                           Engine{SourceEngine::Uring, 2, "uring2"}),
                         [](const auto& p) { return p.param.name; });

TEST(FaultDecorator, OutOfOrderHandsTheCompletionsInFlightOutReversed) {
  test::TempDir dir;
  const std::string path = dir.file("region.bin");
  test::write_pattern_file(path, kFile, kSeed);
  SourceOptions o;
  o.windows = 4;
  auto h = with_fault(open_source(SourceEngine::Uring, path, 256u << 10, o), FaultSpec{FaultCell::OutOfOrder, 0});
  Source& s = *h.source;
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(s.submit(Extent{i * kRead, kRead}, i));
  std::vector<uint64_t> tags;
  while (auto c = s.reap(true)) {
    EXPECT_TRUE(c->ok()) << c->error;
    tags.push_back(c->tag);
    s.release(*c);
    if (tags.size() == 4) break;
  }
  ASSERT_EQ(tags.size(), 4u);
  EXPECT_TRUE(h.report->fired);
  EXPECT_GE(h.report->reordered, 2u);
  EXPECT_EQ(s.windows_free(), 4u);
}

TEST(FaultDecorator, SpecsAndApplicability) {
  EXPECT_EQ(parse_fault_spec("eio").cell, FaultCell::Eio);
  EXPECT_EQ(parse_fault_spec("eio").at, 0u);
  EXPECT_EQ(parse_fault_spec("held-consumer@7").at, 7u);
  for (const char* bad : {"gremlins", "eio@", "eio@x", "eio@-1", "@3", ""}) {
    try {
      parse_fault_spec(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("short-read, eio"), std::string::npos) << e.what();  // names the cells
    }
  }
  test::TempDir dir;
  const std::string path = dir.file("region.bin");
  test::write_pattern_file(path, kFile, kSeed);
  EXPECT_THROW(with_fault(open_source(SourceEngine::Direct, path, 65536), FaultSpec{FaultCell::OutOfOrder, 0}), InputError);
  auto passthrough = with_fault(open_source(SourceEngine::Direct, path, 65536), FaultSpec{FaultCell::HeldConsumer, 0});
  EXPECT_EQ(passthrough.report, nullptr);  // a driver cell: no decorator
  EXPECT_TRUE(fault_is_fatal(FaultCell::WrongObject));
  EXPECT_FALSE(fault_is_fatal(FaultCell::OutOfOrder));
  EXPECT_STREQ(fault_class(FaultCell::RecycleLive), "control");
}

TEST(FaultCells, TheEnginesTableIsTheFile) {
  std::ifstream in(RESID_FAULT_CELLS_JSON);
  ASSERT_TRUE(in) << RESID_FAULT_CELLS_JSON;
  const nlohmann::json file = nlohmann::json::parse(in);
  EXPECT_EQ(fault_cells_json(), file);
  for (const auto& c : file["cells"]) {
    const auto cell = parse_fault_cell(c["cell"].get<std::string>());
    ASSERT_TRUE(cell.has_value()) << c;
    EXPECT_EQ(to_string(*cell), c["cell"].get<std::string>());
    EXPECT_EQ(fault_class(*cell), c["class"].get<std::string>());
    EXPECT_EQ(fault_is_fatal(*cell), c["class"] == "fatal");
    EXPECT_EQ(is_source_fault(*cell), c["carried_by"] == "source");
    EXPECT_EQ(fault_needs_depth(*cell), c["needs_depth"].get<bool>());
  }
  EXPECT_EQ(file["cells"][0]["cell"], "none");
  EXPECT_EQ(fault_class(FaultCell::None), std::string("control"));
}

TEST(FaultDecorator, AnArmedDecoratorDoesNotAllocateOnTheReadPath) {
  ASSERT_TRUE(alloc_hook_installed());
  test::TempDir dir;
  const std::string path = dir.file("region.bin");
  test::write_pattern_file(path, kFile, kSeed);
  SourceOptions o;
  o.windows = 4;
  auto h = with_fault(open_source(SourceEngine::Uring, path, 256u << 10, o), FaultSpec{FaultCell::Eio, 1u << 30});
  Source& s = *h.source;
  const AllocCounts a0 = alloc_counts();
  {
    ReadPathScope scope;
    for (uint64_t i = 0; i < 64; ++i) {
      ASSERT_TRUE(s.submit(Extent{(i % 16) * kRead, kRead}, i));
      auto c = s.reap(true);
      ASSERT_TRUE(c && c->ok());
      s.release(*c);
    }
  }
  EXPECT_EQ(alloc_counts().read_path - a0.read_path, 0u);
}
