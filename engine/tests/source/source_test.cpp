// Sources read exact bytes into their window and reject what must never be published.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "adapters/synthetic/pattern.hpp"
#include "core/errors.hpp"
#include "source/source.hpp"
#include "source/window.hpp"
#include "util/test_util.hpp"

using namespace resid;

static std::string EngineName(const ::testing::TestParamInfo<SourceEngine>& p) {
  return to_string(p.param);
}

namespace {

constexpr uint64_t kSeed = 7;
constexpr uint64_t kFile = 1u << 20;

class SourceTest : public ::testing::TestWithParam<SourceEngine> {
 protected:
  void SetUp() override {
    path_ = dir_.file("region.bin");
    test::write_pattern_file(path_, kFile, kSeed);
  }
  test::TempDir dir_;
  std::string path_;
};

}  // namespace

TEST_P(SourceTest, ReadsExactBytes) {
  auto src = open_source(GetParam(), path_, 256 << 10);
  EXPECT_EQ(src->engine(), GetParam());
  EXPECT_EQ(src->file_size(), kFile);
  EXPECT_EQ(src->window_count(), 1u);
  EXPECT_EQ(src->window_bytes(), 256u << 10);
  for (Extent e : {Extent{0, 64 << 10}, Extent{192 << 10, 256 << 10}, Extent{kFile - 4096, 4096},
                   Extent{4104, 8192}, Extent{512, 1000 * 8}}) {
    Completion c = read_blocking(*src, e, 42);
    ASSERT_TRUE(c.ok()) << c.error;
    EXPECT_EQ(c.tag, 42u);
    const VerifyResult r = verify_pattern(c.data, e.offset, e.length, kSeed);
    EXPECT_EQ(r.bad_words, 0u) << "extent at " << e.offset;
    src->release(c);
  }
  const SourceStats st = src->stats();
  EXPECT_EQ(st.reads, 5u);
  EXPECT_EQ(st.rejections, 0u);
  EXPECT_EQ(st.physical_bytes, st.logical_bytes + st.padding_bytes);
  if (GetParam() == SourceEngine::Direct) {
    EXPECT_GT(st.padding_bytes, 0u);  // the unaligned extents were rounded out
  } else {
    EXPECT_EQ(st.padding_bytes, 0u);
  }
}

TEST_P(SourceTest, WindowIsHugePageAligned) {
  auto src = open_source(GetParam(), path_, 2u << 20);
  Completion c = read_blocking(*src, Extent{0, 4096});
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data) % kHugeAlign, 0u);
  src->release(c);
  EXPECT_THROW(src->release(c), std::logic_error);  // FREE -> FREE is not a transition
}

TEST_P(SourceTest, ExtentPastEofIsRejected) {
  auto src = open_source(GetParam(), path_, 256 << 10);
  for (Extent e : {Extent{kFile - 4096, 8192}, Extent{kFile, 4096}, Extent{kFile + 4096, 4096}, Extent{0, 0}}) {
    Completion c = read_blocking(*src, e);
    EXPECT_FALSE(c.ok()) << "extent at " << e.offset << " accepted";
    EXPECT_EQ(c.data, nullptr);
    src->release(c);
  }
  EXPECT_EQ(src->stats().rejections, 4u);
}

TEST_P(SourceTest, ExtentLargerThanWindowIsRejected) {
  auto src = open_source(GetParam(), path_, 64 << 10);
  Completion c = read_blocking(*src, Extent{0, 128 << 10});
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.error.find("window"), std::string::npos) << c.error;
  src->release(c);
}

TEST_P(SourceTest, ShortReadIsRejected) {
  auto src = open_source(GetParam(), path_, 256 << 10);
  // The file shrinks after the source measured it: the read completes short.
  ASSERT_EQ(::truncate(path_.c_str(), kFile / 2), 0);
  Completion c = read_blocking(*src, Extent{kFile / 2 - 8192, 64 << 10});
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.error.find("short read"), std::string::npos) << c.error;
  EXPECT_EQ(c.data, nullptr);
  src->release(c);
  EXPECT_EQ(src->stats().rejections, 1u);
}

TEST_P(SourceTest, OneWindowMeansOneReadInFlight) {
  auto src = open_source(GetParam(), path_, 64 << 10);
  ASSERT_TRUE(src->submit(Extent{0, 4096}, 1));
  EXPECT_FALSE(src->submit(Extent{4096, 4096}, 2));  // the window is HOST_READY, not FREE
  auto c = src->reap(false);
  ASSERT_TRUE(c);
  EXPECT_FALSE(src->reap(false));
  src->release(*c);
  EXPECT_TRUE(src->submit(Extent{4096, 4096}, 2));
  auto d = src->reap(true);
  ASSERT_TRUE(d && d->ok());
  src->release(*d);
}

INSTANTIATE_TEST_SUITE_P(Engines, SourceTest,
                         ::testing::Values(SourceEngine::Buffered, SourceEngine::Direct),
                         EngineName);

TEST(Source, MissingFileIsAnInputError) {
  EXPECT_THROW(open_source(SourceEngine::Direct, "/nonexistent/region.bin", 4096), InputError);
  EXPECT_THROW(open_source(SourceEngine::Buffered, "/nonexistent/region.bin", 4096), InputError);
}

TEST(Source, DirectRecordsItsAlignment) {
  test::TempDir dir;
  test::write_pattern_file(dir.file("r.bin"), 65536, 1);
  auto src = open_source(SourceEngine::Direct, dir.file("r.bin"), 65536);
  EXPECT_GE(src->alignment(), 512u);
  EXPECT_EQ(src->alignment() & (src->alignment() - 1), 0u);
  EXPECT_EQ(open_source(SourceEngine::Buffered, dir.file("r.bin"), 65536)->alignment(), 1u);
}
