// The fixed latency histogram.
#include <gtest/gtest.h>

#include "core/latency.hpp"

using namespace resid;

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
