// `residctl generate`: greedy decoding of a GGUF with the pinned llama.cpp, through the
// kernel's file mapping (arm A) or through the pager (arms C, D, E, zero), with the llama
// adapter's object steps as the declared sequence (docs/run-contract.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "drivers/common/pager_arm.hpp"
#include "pager/pager.hpp"

namespace resid {

// The consumption signal's granularity (--consumption): `object` lets a step's chunks go
// when the next object's step begins; `tensor` also lets each chunk go inside its step once
// the node that last reads every tensor over it has been computed (adapter.hpp).
enum class Consumption { Object, Tensor };
const char* to_string(Consumption c);

struct GenerateConfig {
  GenerateConfig() {
    pager.threads = 2;  // llama.cpp compute threads
    pager.watchdog_s = 120;
  }
  // arm, budget, chunk size, compute threads, source, fault (source cells, stall: a read
  // index; recycle-live: a pass), ...
  PagerArmConfig pager;
  std::string model;
  std::string prompt;
  uint32_t tokens = 64;
  uint32_t ctx = 512;
  // How filled chunks are backed (pager.hpp); unset: `move` when the chunk size is a
  // multiple of 2 MiB, else `off`.
  std::optional<HugeChunks> huge;
  // The object boundaries of this model's graphs, learned by an earlier run (--graph-plan:
  // no discovery pass, so no pass is slowed by it) and where to write the ones this run
  // used or learned (--graph-plan-out). Empty: discover, write nothing.
  std::string graph_plan, graph_plan_out;
  // A negative control (--repack): let llama.cpp repack the weights it can at load
  // (use_extra_bufts). Repacked weights are no longer file-backed, so the load check must
  // refuse the model (exit 2); a model with nothing to repack runs as usual.
  bool repack = false;
  // The router's selection node of every MoE layer, `<route_node>-N` (the routes are read
  // there, before the expert kernel). Another name is the route check's negative control
  // (--route-node): a MoE model then stops at its first expert-kernel read, naming the node.
  std::string route_node = "ffn_moe_topk";
  // Every this many tokens (and at the last) one progress line on stderr, also when stderr
  // is a log file; 0: only on a terminal (a line redrawn in place).
  uint32_t progress_every = 0;
  // --warm-request (C12, reference 004 Appendix A.3): one process serves the primary request
  // (the run's generation, its outputs), a reset (llama.cpp's memory cleared, the Plan's
  // epoch advanced), the same prompt and --tokens again with the pager's resident chunks
  // kept (the warm request), another reset and the shutdown. A pager arm only.
  bool warm_request = false;
  // --draft (C4, reference 004 Appendix A.1): greedy speculative decoding with this GGUF as
  // the draft (its vocabulary must be the target's); up to draft_max proposed tokens per
  // target traversal. Empty: plain greedy decoding, one traversal per token.
  std::string draft;
  uint32_t draft_max = 6;
  Consumption consumption = Consumption::Object;
};

// Was this residctl built with llama.cpp (RESID_WITH_LLAMA)?
bool generate_available();

// Runs the generation and writes the run directory. Returns the exit status (0 ok, 1
// failed). Throws InputError (exit 2, nothing written) for bad input found before the run
// starts, including a model file llama.cpp cannot load and, without llama.cpp, any call.
int run_generate(const GenerateConfig& cfg);

}  // namespace resid
