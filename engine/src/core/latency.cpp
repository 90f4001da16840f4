#include "core/latency.hpp"

#include <algorithm>
#include <cmath>

namespace resid {

// Values below kSub map linearly; above, bucket = (octave, top kSubBits bits after the MSB).
int LatencyHistogram::bucket_of(uint64_t v) {
  if (v < static_cast<uint64_t>(kSub)) return static_cast<int>(v);
  const int msb = 63 - __builtin_clzll(v);
  const int shift = msb - kSubBits;
  const int sub = static_cast<int>((v >> shift) & (kSub - 1));
  return (shift + 1) * kSub + sub;
}

uint64_t LatencyHistogram::bucket_upper(int b) {
  if (b < kSub) return static_cast<uint64_t>(b);
  const int shift = b / kSub - 1;
  const uint64_t sub = static_cast<uint64_t>(b % kSub);
  const uint64_t lo = (static_cast<uint64_t>(kSub) + sub) << shift;
  return lo + ((1ULL << shift) - 1);
}

void LatencyHistogram::record(uint64_t ns) {
  ++buckets_[static_cast<size_t>(bucket_of(ns))];
  ++count_;
  max_ = std::max(max_, ns);
}

uint64_t LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen >= rank) return std::min(bucket_upper(static_cast<int>(b)), max_);
  }
  return max_;
}

}  // namespace resid
