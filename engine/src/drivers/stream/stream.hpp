// `residctl stream` (docs/run-contract.md): streams objects in a declared order through the
// source's windows into a slot arena of stable addresses, with the Plan's full ticket,
// generation, epoch, consumer, reset and shutdown lifecycle; consumer threads verify every
// delivered byte against checksums of the file's extents. The fault cells of reference 004
// Table 7 (source/fault.hpp) run here: the source cells through the fault decorator, the
// held-consumer, reset and shutdown cells by the producer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "source/fault.hpp"
#include "source/source.hpp"

namespace resid {

struct StreamConfig {
  std::string file;
  std::string manifest;                 // objects.json, or empty with object_bytes
  std::optional<uint64_t> object_bytes;
  std::string out;
  SourceEngine source = SourceEngine::Uring;
  std::optional<uint32_t> windows;      // default: 8 for uring, 1 otherwise
  std::optional<uint32_t> depth;        // default: windows
  uint64_t window_bytes = 2u << 20;
  bool register_buffers = false;
  uint32_t slots = 8;
  uint32_t consumers = 2;
  uint32_t passes = 1;
  uint32_t bundle = 1;                  // objects per request
  bool eager_reconcile = false;
  // --fault CELL[@N]: a source cell (N: a read index; out-of-order: a completion index),
  // held-consumer (N: a step), reset-outstanding (N: a read), shutdown-live-consumer.
  FaultSpec fault;
  double watchdog_s = 60;
  // The file is a `mkregion` region of this seed: the reference checksums come from the
  // pattern instead of a read of the file (so no read precedes the timed stream).
  std::optional<uint64_t> pattern_seed;
};

// Runs the stream and writes the run directory. Returns the exit status (0 ok, 1 failed).
// Throws InputError (exit 2, nothing written) for bad input found before the run starts.
int run_stream(const StreamConfig& cfg);

}  // namespace resid
