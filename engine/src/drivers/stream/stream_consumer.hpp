// `residctl stream`'s consumers: each acquires every step's version from the Plan by its
// request tag, hashes its share of the object's blocks, releases it; the last of the step
// compares the sum with the reference. The held-consumer and shutdown-live-consumer cells
// hold a version here while the producer tries to reuse it or to shut down under it.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "drivers/stream/stream.hpp"
#include "drivers/stream/stream_layout.hpp"
#include "plan/state.hpp"

namespace resid {

// State the producer and the consumers share (atomics; the Plan has its own lock).
struct StreamShared {
  StreamShared(const PlanManifest& m_, Plan& p, const StreamLayout& l, const std::vector<uint64_t>& r,
               const StreamConfig& c)
      : m(m_), plan(p), lay(l), ref(r), cfg(c), step_sum(l.steps), step_done(l.steps) {}
  const PlanManifest& m;
  Plan& plan;
  const StreamLayout& lay;
  const std::vector<uint64_t>& ref;
  const StreamConfig& cfg;
  std::vector<std::atomic<uint64_t>> step_sum;
  std::vector<std::atomic<uint32_t>> step_done;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> mismatches{0}, objects_verified{0}, bytes_verified{0};
  std::atomic<int64_t> first_mismatch_step{-1};
  std::atomic<uint8_t> consumer_error{0};  // PlanError of the first consumer failure
  std::atomic<int64_t> consumer_error_step{-1};
  std::atomic<bool> consumer_watchdog{false};
  // held-consumer / shutdown-live-consumer
  std::atomic<bool> holding{false}, refused{false}, held_done{false}, held_survived{true};
  std::atomic<int32_t> held_slot{-1};
  std::atomic<uint64_t> held_step{0}, held_ns{0};

  uint64_t watchdog_ns() const { return static_cast<uint64_t>(cfg.watchdog_s * 1e9); }
  void halt() {
    stop.store(true);
    plan.notify_all();
  }
};

// Consumer `me` of cfg.consumers, over every step.
void consume(StreamShared& sh, uint32_t me);

}  // namespace resid
