// trace.bin's format and the consumption-signal audit.
#include <gtest/gtest.h>

#include <cstring>

#include "pager/signal_audit.hpp"
#include "pager/trace.hpp"

using namespace resid;

TEST(Trace, SortedLittleEndianImage) {
  Trace t(8);
  t.append(1, 3, TraceKind::Eviction);
  t.append(1, 2, TraceKind::Access, kTraceMiss);
  t.append(0, 0, TraceKind::Signal);
  t.append(1, 1, TraceKind::DemandFill);
  t.append(0, 0, TraceKind::Access);
  const std::string b = t.serialize(65536, 9);
  ASSERT_EQ(b.size(), 32u + 5 * 16);
  EXPECT_EQ(b.substr(0, 8), "RSTRACE1");
  uint32_t u32;
  uint64_t u64;
  std::memcpy(&u32, b.data() + 8, 4);
  EXPECT_EQ(u32, 1u);
  std::memcpy(&u32, b.data() + 12, 4);
  EXPECT_EQ(u32, 16u);
  std::memcpy(&u64, b.data() + 16, 8);
  EXPECT_EQ(u64, 65536u);
  std::memcpy(&u64, b.data() + 24, 8);
  EXPECT_EQ(u64, 9u);
  const auto r = t.sorted();
  // (step, kind, chunk): (0,1,0) (0,5,0) (1,1,2) (1,2,1) (1,4,3)
  EXPECT_EQ(r[0].kind, 1);
  EXPECT_EQ(r[1].kind, 5);
  EXPECT_EQ(r[2].chunk, 2u);
  EXPECT_EQ(r[2].flags, kTraceMiss);
  EXPECT_EQ(r[3].kind, 2);
  EXPECT_EQ(r[4].kind, 4);
  std::memcpy(&u32, b.data() + 32 + 2 * 16 + 4, 4);
  EXPECT_EQ(u32, 2u);
  EXPECT_EQ(static_cast<uint8_t>(b[32 + 2 * 16 + 8]), 1);
  EXPECT_EQ(static_cast<uint8_t>(b[32 + 2 * 16 + 9]), 1);
}

TEST(SignalAudit, OrderAndZeroSignalChunks) {
  SignalAudit a(4);
  for (uint64_t s = 0; s < 8; ++s) a.record(s);
  EXPECT_EQ(a.out_of_order(), 0u);
  EXPECT_TRUE(a.zero_signal_chunks().empty());
  SignalAudit b(4);
  for (uint64_t s : {0, 1, 3}) b.record(s);  // step 2 never signalled
  EXPECT_EQ(b.out_of_order(), 1u);
  EXPECT_EQ(b.zero_signal_chunks(), std::vector<uint32_t>{2});
}
