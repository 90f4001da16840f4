// Consumption-cursor audit. The declared policy is only as good as its cursor, so every
// signal is counted per chunk and checked for order: exactly one per step, in step order.
// A declared chunk that never receives a signal (a signal hooked to the wrong place) is
// detectable instead of silently degrading the policy.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace resid {

class SignalAudit {
 public:
  explicit SignalAudit(uint32_t chunks) : per_chunk_(chunks, 0) {}
  void record(uint64_t cursor);

  uint64_t signals() const { return signals_; }
  uint64_t out_of_order() const { return out_of_order_; }  // cursor != previous + 1
  uint64_t count(uint32_t chunk) const { return per_chunk_.at(chunk); }
  std::vector<uint32_t> zero_signal_chunks() const;

 private:
  std::vector<uint64_t> per_chunk_;
  std::optional<uint64_t> last_;
  uint64_t signals_ = 0;
  uint64_t out_of_order_ = 0;
};

}  // namespace resid
