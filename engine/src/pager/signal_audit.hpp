// Consumption-cursor audit. The declared policy is only as good as its cursor, so every
// signal is counted per chunk and checked for order: exactly one per step, in step order.
// A declared chunk that never receives a signal (a signal hooked to the wrong place) is
// detectable instead of silently degrading the policy.
//
// Two shapes of step: chunk steps (scan: step s is chunk s mod N) and object steps
// (generate: step s is the object s mod S of a declared pass, touching a set of chunks).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace resid {

class SignalAudit {
 public:
  // Chunk steps: the signal for step s counts for chunk s % chunks.
  explicit SignalAudit(uint32_t chunks) : per_chunk_(chunks, 0), declared_(chunks, 1) {}
  // Object steps: the signal for step s counts for every chunk of steps[s % steps.size()].
  // Chunks that appear in no step are not declared (and never reported as unsignalled).
  SignalAudit(uint32_t chunks, std::vector<std::vector<uint32_t>> steps);
  void record(uint64_t cursor);

  uint64_t signals() const { return signals_; }
  uint64_t out_of_order() const { return out_of_order_; }  // cursor != previous + 1
  uint64_t count(uint32_t chunk) const { return per_chunk_.at(chunk); }
  bool declared(uint32_t chunk) const { return declared_.at(chunk) != 0; }
  std::optional<uint64_t> last() const { return last_; }
  // Declared chunks with no signal so far, ascending.
  std::vector<uint32_t> zero_signal_chunks() const;

 private:
  std::vector<uint64_t> per_chunk_;
  std::vector<uint8_t> declared_;
  std::vector<std::vector<uint32_t>> steps_;  // empty: chunk steps
  std::optional<uint64_t> last_;
  uint64_t signals_ = 0;
  uint64_t out_of_order_ = 0;
};

}  // namespace resid
