// The synthetic adapter: a cyclic layer scan over a region file. Driver threads walk the
// region chunk by chunk in the declared order 0..N-1, in lockstep (a barrier per chunk step,
// like a layer-synchronous thread pool), verifying every word they read against the pattern,
// and deliver the consumption signal at the end of each step (all-threads-finished) or as
// thread 0 starts it (thread0-started, the racy signal). Through the pager (pager arms) or a
// plain file mapping (kernel-mmap, arm A: a chunk access is a miss when any of its pages is
// out of the page cache just before its step).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "adapters/synthetic/pattern.hpp"
#include "pager/pager.hpp"
#include "pager/trace.hpp"

namespace resid {

enum class SignalKind { AllThreadsFinished, Thread0Started };
const char* to_string(SignalKind s);
std::optional<SignalKind> parse_signal(std::string_view s);

// How the driver threads keep step: `step`, a barrier per chunk step (lockstep, the
// default); `none`, each thread walks at its own pace (one barrier at the end), so with
// per-thread jitter in the compute phase a fast thread runs steps ahead of a slow one. Then
// the all-threads-finished signal delivers step s's signal once every thread has finished s
// (in step order), the access record of step s is written then, and it is a miss when the
// chunk was filled between the first thread's start of s and that signal.
enum class SyncMode { Step, None };
const char* to_string(SyncMode m);
std::optional<SyncMode> parse_sync(std::string_view s);

struct WalkConfig {
  uint64_t chunk_size = 2u << 20;
  uint32_t threads = 1;
  uint64_t seed = 1;        // the region's pattern seed
  uint64_t compute_us = 0;  // busy work per thread per chunk step
  SignalKind signal = SignalKind::AllThreadsFinished;
  SyncMode sync = SyncMode::Step;
  // Per thread and step, uniform in [0, jitter_us] microseconds more compute, from a
  // generator seeded by (jitter_seed, thread, step): the same for every run of one config.
  uint64_t jitter_us = 0;
  uint64_t jitter_seed = 1;
};

// State the driver threads of one walk share.
class Walk {
 public:
  Walk(const WalkConfig& cfg, uint64_t file_bytes, uint64_t steps, const std::byte* base, Pager* pager, Trace& trace);

  // Arm A starts cold: its first step's miss test (after the caller dropped the page cache).
  void start_kernel_mapping();
  // Thread t's walk (the barrier's completion calls end_of_step once per step).
  template <class Barrier>
  void drive(uint32_t t, Barrier& bar) {
    for (uint64_t s = 0; s < steps_; ++s) {
      step_body(t, s);
      bar.arrive_and_wait();
      if (stop_.load()) break;
    }
  }
  // The barrier's completion for the step just walked: record the access, signal, go on?
  void end_of_step();
  // --sync none: thread t's walk at its own pace.
  void drive_free(uint32_t t);

  uint64_t accesses() const { return accesses_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  uint64_t bytes_verified() const { return bytes_verified_.load(); }
  uint64_t bad_words() const { return bad_words_.load(); }
  // Why the walk stopped early or failed ("" when it did not): a wrong byte, the audit.
  std::string error() const;

 private:
  void step_body(uint32_t t, uint64_t s);
  uint64_t jitter(uint32_t t, uint64_t s) const;
  void free_step_begin(uint64_t s);
  void free_step_done(uint64_t s);
  void record_step(uint64_t s, bool miss);
  void probe_kernel_miss(uint64_t s);
  uint64_t chunk_len(uint32_t c) const;

  WalkConfig cfg_;
  uint64_t file_bytes_;
  uint32_t chunks_;
  uint64_t steps_;
  const std::byte* base_;
  Pager* pager_;  // null for kernel-mmap
  Trace& trace_;

  // Written only inside the barrier completion (one thread at a time, ordered by it).
  uint64_t step_ = 0;
  // Atomic as well: a failed run reports them while its drivers may still be walking.
  std::atomic<uint64_t> accesses_{0}, misses_{0};
  bool next_miss_ = false;  // kernel-mmap: mincore verdict for the step about to run
  std::vector<unsigned char> mincore_buf_;
  std::atomic<bool> stop_{false};
  std::string stop_reason_;

  std::atomic<uint64_t> bytes_verified_{0}, bad_words_{0};
  mutable std::mutex err_mu_;
  std::optional<VerifyMismatch> first_bad_;
  uint64_t first_bad_step_ = 0;

  // --sync none: per step, threads finished, whether it began, fills of its chunk at its start.
  std::vector<std::atomic<uint32_t>> done_;
  std::vector<std::atomic<uint8_t>> begun_;
  std::vector<uint64_t> fills_at_begin_;
  std::vector<uint8_t> kernel_miss_;
  std::mutex order_mu_;  // steps are recorded and signalled in order, one thread at a time
  uint64_t next_to_record_ = 0;
};

}  // namespace resid
