// Small pieces: pattern, trace format, latency histogram, signal audit, cgroup parsing.
#include <gtest/gtest.h>

#include <cstring>

#include "cgroup_probe.hpp"
#include "latency.hpp"
#include "pattern.hpp"
#include "signal_audit.hpp"
#include "trace.hpp"

using namespace resid;

TEST(Pattern, MatchesTheContractDefinition) {
  // splitmix64 reference values (seed 0 state 0 -> first output of the standard generator).
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(pattern_word(0, 0), splitmix64(0));
  EXPECT_EQ(pattern_word(8, 1), splitmix64(8 ^ kGolden));
  std::vector<std::byte> buf(4096);
  fill_pattern(buf.data(), 8192, buf.size(), 3);
  EXPECT_EQ(verify_pattern(buf.data(), 8192, buf.size(), 3).bad_words, 0u);
  buf[100] = std::byte{static_cast<unsigned char>(static_cast<unsigned char>(buf[100]) ^ 0x10)};
  buf[2000] = std::byte{static_cast<unsigned char>(static_cast<unsigned char>(buf[2000]) ^ 0x01)};
  const VerifyResult r = verify_pattern(buf.data(), 8192, buf.size(), 3);
  EXPECT_EQ(r.bad_words, 2u);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->offset, 8192u + 100);
  EXPECT_EQ(r.first->actual, r.first->expected ^ 0x10);
  EXPECT_EQ(verify_pattern(buf.data(), 8192, buf.size(), 4).bad_words, 512u);  // wrong seed
}

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

TEST(Latency, QuantilesWithinBucketPrecision) {
  LatencyHistogram h;
  EXPECT_EQ(h.quantile(0.5), 0u);
  for (uint64_t v = 1; v <= 10000; ++v) h.record(v * 1000);
  EXPECT_EQ(h.count(), 10000u);
  EXPECT_EQ(h.max(), 10000u * 1000);
  const double p50 = static_cast<double>(h.quantile(0.5));
  const double p99 = static_cast<double>(h.quantile(0.99));
  EXPECT_NEAR(p50, 5000e3, 5000e3 / 32);
  EXPECT_NEAR(p99, 9900e3, 9900e3 / 32);
  LatencyHistogram small;
  for (uint64_t v : {3, 3, 3, 7}) small.record(v);
  EXPECT_EQ(small.quantile(0.5), 3u);
  EXPECT_EQ(small.quantile(1.0), 7u);
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

TEST(Cgroup, ParsesV1AndV2Lines) {
  const auto v1 = parse_proc_cgroup("9:name=systemd:/\n4:memory:/a/b\n1:cpu,cpuacct:/\n0::/\n");
  EXPECT_EQ(v1.v1_memory_path, std::optional<std::string>("/a/b"));
  EXPECT_EQ(v1.v2_path, std::optional<std::string>("/"));
  const auto v2 = parse_proc_cgroup("0::/user.slice/session-1.scope\n");
  EXPECT_FALSE(v2.v1_memory_path);
  EXPECT_EQ(v2.v2_path, std::optional<std::string>("/user.slice/session-1.scope"));
}
