// `residctl generate`: greedy decoding of a GGUF with the pinned llama.cpp, through the
// kernel's file mapping (arm A) or through the pager (arms C, D, E, zero), with the llama
// adapter's object steps as the declared sequence (docs/run-contract.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "drivers/arm.hpp"
#include "pager/pager.hpp"
#include "source/fault.hpp"
#include "source/source.hpp"

namespace resid {

struct GenerateConfig {
  std::string model;
  std::string out;
  std::string prompt;
  Arm arm = Arm::PagerDeclared;
  std::optional<uint64_t> budget_bytes;
  uint64_t chunk_size = 2u << 20;
  uint32_t tokens = 64;
  uint32_t threads = 2;
  uint32_t ctx = 512;
  SourceEngine source = SourceEngine::Direct;
  // Source windows and in-flight bound; unset: 8 windows for uring, 1 for the blocking
  // engines (which take only 1), depth = windows.
  std::optional<uint32_t> windows;
  std::optional<uint32_t> depth;
  uint32_t prefetch_depth = 2;
  bool eager_reconcile = false;
  double watchdog_s = 120;
  bool calibrate = false;
  // How filled chunks are backed (pager.hpp); unset: `move` when the chunk size is a
  // multiple of 2 MiB, else `off` (huge_mode() in generate.cpp).
  std::optional<HugeChunks> huge;
  // --fault CELL[@N]: a source cell (reads), stall (reads) or recycle-live (a pass).
  FaultSpec fault;
};


// Was this residctl built with llama.cpp (RESID_WITH_LLAMA)?
bool generate_available();

// Runs the generation and writes the run directory. Returns the exit status (0 ok, 1
// failed). Throws InputError (exit 2, nothing written) for bad input found before the run
// starts, including a model file llama.cpp cannot load and, without llama.cpp, any call.
int run_generate(const GenerateConfig& cfg);

}  // namespace resid
