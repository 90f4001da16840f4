// `residctl stream`'s declared sequence: step s streams object step_object[s]; bundle b is
// steps [b*B, min((b+1)*B, steps)). With no reset, reads are issued in (step, piece) order,
// so read index k is piece k - step_first_read[s] of the step s that holds it.
#pragma once

#include <cstdint>
#include <vector>

#include "drivers/stream/stream.hpp"
#include "plan/manifest.hpp"

namespace resid {

struct StreamLayout {
  std::vector<uint32_t> step_object;
  std::vector<uint64_t> step_first_read;  // steps + 1 entries
  uint64_t steps = 0;
  uint64_t bundles = 0;
  uint32_t bundle = 1;
  uint64_t total_reads() const { return step_first_read.back(); }
  uint64_t step_of_read(uint64_t k) const;
  uint64_t bundle_first_step(uint64_t b) const { return b * bundle; }
  uint64_t bundle_steps(uint64_t b) const;
  // The manifest piece read k reads (no reset).
  uint32_t piece_of_read(const PlanManifest& m, uint64_t k) const;
};

// `passes` passes over `order` (object indexes), `bundle` objects per request.
StreamLayout make_stream_layout(const PlanManifest& m, const std::vector<uint32_t>& order, uint32_t passes,
                                uint32_t bundle);

// A fault point that cannot fire is bad input, not a silent no-op (InputError naming why).
// `depth`: the source's in-flight bound.
void check_stream_fault(const StreamConfig& cfg, const StreamLayout& lay, const PlanManifest& m, uint32_t windows,
                        uint32_t depth);

}  // namespace resid
