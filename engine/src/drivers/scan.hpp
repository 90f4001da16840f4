// `residctl scan`: the synthetic workload. Driver threads walk the region chunk by chunk
// in the declared cyclic order, in lockstep (a barrier per chunk step, like a
// layer-synchronous thread pool), verifying every word they read against the pattern.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "drivers/arm.hpp"
#include "source/fault.hpp"
#include "source/source.hpp"

namespace resid {

enum class SignalKind { AllThreadsFinished, Thread0Started };

const char* to_string(SignalKind s);
std::optional<SignalKind> parse_signal(std::string_view s);

struct ScanConfig {
  std::string region;
  std::string out;
  uint64_t seed = 1;
  Arm arm = Arm::PagerDeclared;
  std::optional<uint64_t> budget_bytes;
  uint64_t chunk_size = 2u << 20;
  uint32_t passes = 3;
  uint32_t threads = 1;
  uint64_t compute_us = 0;
  SignalKind signal = SignalKind::AllThreadsFinished;
  SourceEngine source = SourceEngine::Direct;
  std::optional<uint32_t> windows;  // default 8 for uring, 1 for the blocking engines
  std::optional<uint32_t> depth;    // default windows
  uint32_t prefetch_depth = 2;
  bool eager_reconcile = false;
  double watchdog_s = 60;
  bool calibrate = false;
  FaultSpec fault;  // --fault CELL[@N]: a source cell or stall (N: a read index)
};

// Smallest budget_chunks a pager arm accepts: every driver thread may hold one chunk and
// one more must be fillable (threads + 1); arm E also keeps its prefetch horizon
// (+ prefetch_depth) so prefetching does not evict its own prefetches.
uint64_t min_budget_chunks(const ScanConfig& cfg);

// Runs the scan and writes the run directory. Returns the exit status (0 ok, 1 failed).
// Throws InputError (exit 2, nothing written) for bad input found before the run starts.
int run_scan(const ScanConfig& cfg);

}  // namespace resid
