// The uring source engine: exact bytes (against direct and buffered), the in-flight bound,
// completions that carry tag, extent and window back, rejections that never expose data,
// and zero allocations on the submit/reap/release path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "adapters/synthetic/pattern.hpp"
#include "core/alloc_count.hpp"
#include "core/errors.hpp"
#include "source/source.hpp"
#include "source/uring.hpp"
#include "source/window.hpp"
#include "util/test_util.hpp"

using namespace resid;

namespace {

constexpr uint64_t kSeed = 11;
constexpr uint64_t kFile = 4u << 20;

struct EngineCase {
  SourceEngine engine;
  size_t windows;
  bool registered;
  std::string name;
};

std::unique_ptr<Source> open_case(const EngineCase& c, const std::string& path, size_t cap) {
  SourceOptions o;
  o.windows = c.windows;
  o.register_buffers = c.registered;
  return open_source(c.engine, path, cap, o);
}

class AllEngines : public ::testing::TestWithParam<EngineCase> {
 protected:
  void SetUp() override {
    path_ = dir_.file("region.bin");
    test::write_pattern_file(path_, kFile, kSeed);
  }
  test::TempDir dir_;
  std::string path_;
};

class Uring : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("region.bin");
    test::write_pattern_file(path_, kFile, kSeed);
  }
  std::unique_ptr<UringSource> open(size_t windows, size_t depth = 0, size_t cap = 256u << 10, bool reg = false) {
    SourceOptions o;
    o.windows = windows;
    o.depth = depth;
    o.register_buffers = reg;
    return std::make_unique<UringSource>(path_, cap, o);
  }
  test::TempDir dir_;
  std::string path_;
};

const std::vector<Extent> kExtents = {{0, 64 << 10},      {192 << 10, 256 << 10}, {kFile - 4096, 4096},
                                      {4104, 8192},       {512, 1000 * 8},       {1u << 20, 100000},
                                      {3u << 20, 200008}, {77, 5000},            {kFile - 8, 8}};

}  // namespace

// Every engine returns the same bytes for the same extents, read many at a time where it can.
TEST_P(AllEngines, ByteExactAcrossEngines) {
  auto src = open_case(GetParam(), path_, 256 << 10);
  EXPECT_EQ(src->engine(), GetParam().engine);
  std::set<uint64_t> seen;
  size_t next = 0, done = 0;
  while (done < kExtents.size()) {
    while (next < kExtents.size() && src->free_window() >= 0) {
      const int w = src->free_window();
      ASSERT_TRUE(src->submit(kExtents[next], 1000 + next));
      (void)w;
      ++next;
    }
    auto c = src->reap(true);
    ASSERT_TRUE(c.has_value());
    ASSERT_TRUE(c->ok()) << c->error;
    const size_t i = c->tag - 1000;
    ASSERT_LT(i, kExtents.size());
    EXPECT_TRUE(seen.insert(c->tag).second);
    EXPECT_EQ(c->extent.offset, kExtents[i].offset);
    EXPECT_EQ(c->extent.length, kExtents[i].length);
    // Compare with the pattern word by word (the extents start on any byte).
    std::vector<std::byte> want(kExtents[i].length + 16);
    const uint64_t a = kExtents[i].offset / 8 * 8;
    fill_pattern(want.data(), a, (kExtents[i].offset + kExtents[i].length - a + 7) / 8 * 8, kSeed);
    EXPECT_EQ(std::memcmp(c->data, want.data() + (kExtents[i].offset - a), kExtents[i].length), 0)
        << "extent " << i;
    src->release(*c);
    ++done;
  }
  const SourceStats st = src->stats();
  EXPECT_EQ(st.reads, kExtents.size());
  EXPECT_EQ(st.completions, kExtents.size());
  EXPECT_EQ(st.rejections, 0u);
  EXPECT_EQ(st.physical_bytes, st.logical_bytes + st.padding_bytes);
  EXPECT_LE(st.peak_inflight, GetParam().windows);
  EXPECT_EQ(src->free_window() >= 0, true);
}

INSTANTIATE_TEST_SUITE_P(Engines, AllEngines,
                         ::testing::Values(EngineCase{SourceEngine::Buffered, 1, false, "buffered"},
                                           EngineCase{SourceEngine::Direct, 1, false, "direct"},
                                           EngineCase{SourceEngine::Uring, 1, false, "uring1"},
                                           EngineCase{SourceEngine::Uring, 8, false, "uring8"},
                                           EngineCase{SourceEngine::Uring, 8, true, "uring8_registered"}),
                         [](const auto& p) { return p.param.name; });

TEST_F(Uring, WindowsAreHugePageAlignedAndDepthIsBounded) {
  auto src = open(8, 4);
  EXPECT_EQ(src->window_count(), 8u);
  EXPECT_EQ(src->max_inflight(), 4u);
  EXPECT_GE(src->alignment(), 512u);
  std::vector<Completion> got;
  size_t accepted = 0;
  for (uint64_t i = 0; i < 8; ++i)
    if (src->submit(Extent{i * 65536, 65536}, i)) ++accepted;
  EXPECT_EQ(accepted, 4u);  // depth 4: the fifth submit is refused, nothing is queued behind it
  EXPECT_EQ(src->free_window(), -1);
  EXPECT_EQ(src->inflight(), 4u);
  src->drain();  // every read done; the completions stay reapable without waiting
  while (auto c = src->reap(false)) got.push_back(std::move(*c));
  ASSERT_EQ(got.size(), 4u);
  std::set<int> windows;
  for (auto& c : got) {
    ASSERT_TRUE(c.ok()) << c.error;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data - (c.extent.offset % src->alignment())) % kHugeAlign, 0u);
    EXPECT_EQ(c.extent.offset, c.tag * 65536);
    windows.insert(c.window);
  }
  EXPECT_EQ(windows.size(), 4u);
  EXPECT_EQ(src->windows_free(), 4u);  // HOST_READY until released
  for (auto& c : got) src->release(c);
  EXPECT_EQ(src->windows_free(), 8u);
  EXPECT_THROW(src->release(got[0]), std::logic_error);  // FREE -> FREE is not a transition
  EXPECT_EQ(src->stats().peak_inflight, 4u);
}

TEST_F(Uring, NextWindowIsTheOneSubmitUses) {
  auto src = open(3);
  for (uint64_t i = 0; i < 3; ++i) {
    const int w = src->free_window();
    ASSERT_GE(w, 0);
    ASSERT_TRUE(src->submit(Extent{i * 4096, 4096}, i));
    auto c = src->reap(true);
    ASSERT_TRUE(c && c->ok());
    EXPECT_EQ(c->window, w);
    if (i != 1) src->release(*c);  // keep window of read 1 held
  }
  EXPECT_EQ(src->windows_free(), 2u);
}

TEST_F(Uring, RejectionsNeverExposeData) {
  auto src = open(4, 4, 64 << 10);
  const std::vector<std::pair<Extent, RejectReason>> bad = {
      {{kFile - 4096, 8192}, RejectReason::OutsideFile},
      {{kFile, 4096}, RejectReason::OutsideFile},
      {{0, 0}, RejectReason::OutsideFile},
      {{0, 128 << 10}, RejectReason::TooLarge},
  };
  for (const auto& [e, why] : bad) {
    ASSERT_TRUE(src->submit(e, 9));
    auto c = src->reap(true);
    ASSERT_TRUE(c.has_value());
    EXPECT_FALSE(c->ok());
    EXPECT_EQ(c->reason, why);
    EXPECT_EQ(c->data, nullptr);
    EXPECT_FALSE(c->error.empty());
    src->release(*c);
  }
  // A real short read: the file shrinks after the source measured it.
  ASSERT_EQ(::truncate(path_.c_str(), kFile / 2), 0);
  ASSERT_TRUE(src->submit(Extent{kFile / 2 - 8192, 64 << 10}, 10));
  auto c = src->reap(true);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->reason, RejectReason::ShortRead);
  EXPECT_NE(c->error.find("short read"), std::string::npos) << c->error;
  EXPECT_EQ(c->data, nullptr);
  src->release(*c);
  EXPECT_EQ(src->stats().rejections, 5u);
  EXPECT_EQ(src->windows_free(), 4u);
}

TEST_F(Uring, BadOptionsAreInputErrors) {
  SourceOptions o;
  o.windows = 2;
  o.depth = 3;
  EXPECT_THROW(UringSource(path_, 65536, o), InputError);
  o.windows = 0;
  o.depth = 0;
  EXPECT_THROW(UringSource(path_, 65536, o), InputError);
  o.windows = 2;
  EXPECT_THROW(UringSource(dir_.file("missing.bin"), 65536, o), InputError);
  // The blocking engines have one window: asking for more is bad input, not a fallback.
  EXPECT_THROW(open_source(SourceEngine::Direct, path_, 65536, o), InputError);
  EXPECT_THROW(open_source(SourceEngine::Buffered, path_, 65536, o), InputError);
  EXPECT_EQ(parse_source_engine("uring"), SourceEngine::Uring);
  EXPECT_STREQ(to_string(SourceEngine::Uring), "uring");
}

TEST_F(Uring, DestroyingWithReadsInFlightWaitsForThem) {
  for (int i = 0; i < 5; ++i) {
    auto src = open(8, 8, 1u << 20);
    for (uint64_t k = 0; k < 4; ++k) ASSERT_TRUE(src->submit(Extent{k << 20, 1u << 20}, k));
    // destroyed here with four reads in the kernel's hands
  }
}

TEST_F(Uring, ReadPathDoesNotAllocate) {
  ASSERT_TRUE(alloc_hook_installed());
  for (bool reg : {false, true}) {
    auto src = open(8, 8, 256u << 10, reg);
    auto cycle = [&](uint64_t n) {
      uint64_t sub = 0, done = 0;
      while (done < n) {
        while (sub < n && src->free_window() >= 0) {
          ASSERT_TRUE(src->submit(Extent{(sub * 262144) % (kFile - 262144) + 100, 100000}, sub));
          ++sub;
        }
        auto c = src->reap(true);
        ASSERT_TRUE(c && c->ok());
        src->release(*c);
        ++done;
      }
    };
    cycle(16);  // warm-up
    const AllocCounts a0 = alloc_counts();
    {
      ReadPathScope scope;
      cycle(200);
    }
    EXPECT_EQ(alloc_counts().read_path - a0.read_path, 0u) << "registered=" << reg;
  }
}
