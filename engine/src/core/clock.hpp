// The one clock every duration in a run record is measured with: monotonic nanoseconds.
#pragma once

#include <chrono>
#include <cstdint>

namespace resid {

inline uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace resid
