// Fixed-size log-linear latency histogram: recording is a few arithmetic ops and one
// increment, never an allocation, so it can sit on the fault path. Quantiles are exact to
// within 1/64 relative error; max is exact.
#pragma once

#include <array>
#include <cstdint>

namespace resid {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;  // 64 sub-buckets per power of two
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kOctaves = 64 - kSubBits + 1;

  void record(uint64_t ns);
  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  // Upper bound of the bucket holding the q-quantile (q in [0,1]); 0 when empty.
  uint64_t quantile(double q) const;

 private:
  static int bucket_of(uint64_t v);
  static uint64_t bucket_upper(int b);

  std::array<uint64_t, kOctaves * kSub> buckets_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

}  // namespace resid
