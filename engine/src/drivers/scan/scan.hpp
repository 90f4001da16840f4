// `residctl scan`: the synthetic study's driver. The synthetic adapter's walk
// (adapters/synthetic/walk.hpp) runs over the region through the pager (pager arms) or the
// kernel's file mapping (kernel-mmap), and the run directory records it.
#pragma once

#include <cstdint>
#include <string>

#include "adapters/synthetic/walk.hpp"
#include "drivers/common/pager_arm.hpp"

namespace resid {

struct ScanConfig {
  PagerArmConfig pager;  // arm, budget, chunk size, driver threads, source, fault, ...
  std::string region;
  uint64_t seed = 1;
  uint32_t passes = 3;
  uint64_t compute_us = 0;
  SignalKind signal = SignalKind::AllThreadsFinished;
  SyncMode sync = SyncMode::Step;
  uint64_t jitter_us = 0;
  uint64_t jitter_seed = 1;
};

// Runs the scan and writes the run directory. Returns the exit status (0 ok, 1 failed).
// Throws InputError (exit 2, nothing written) for bad input found before the run starts.
int run_scan(const ScanConfig& cfg);

}  // namespace resid
