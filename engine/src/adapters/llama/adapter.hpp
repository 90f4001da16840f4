// The llama adapter (built with RESID_WITH_LLAMA): object discovery from the GGUF file, and
// the consumption signal and router routes from llama.cpp's eval callback.
//
// The eval callback (ggml_backend_sched_eval_callback) is asked, for every graph node in
// order, whether the caller wants that node's result (ask=true); the scheduler computes the
// nodes up to and including the first wanted one as one group, then calls back with
// ask=false. So an ask=true call comes before its whole group is computed, and the
// ask=false call of a wanted node comes after every node up to it is computed and before
// any later node is. At commit 0c1e5709 the llama graph is, per pass:
//
//   embd (GET_ROWS on token_embd)           <- the graph's first node: pass start, enter embd;
//                                              its ask=true call also reads the batch's token
//                                              ids (src[1], set before the graph runs): the
//                                              rows, hence the chunks, the step really reads
//   norm-0 (RMS_NORM, no weight)            <- wanted; its ask=false: embd consumed, enter layer.0
//   attn_norm-0 (MUL by blk.0.attn_norm) ... l_out-0
//   norm-1 (RMS_NORM)                       <- wanted; its ask=false: layer.0 consumed, enter layer.1
//   ...
//   norm (RMS_NORM, il = -1)                <- wanted; its ask=false: layer.L-1 consumed, enter output
//   result_norm (MUL by output_norm) result_output (MUL_MAT by output / token_embd)
//
// (the second RMS_NORM of a layer, before ffn_norm-N, has the same name and is not a
// boundary). The boundary is therefore exact: the weightless node immediately before an
// object's first weight read. It is also checked: at every ask=true call each source tensor
// of the node that lies in the model mapping is looked up, and a weight read of a tensor
// outside the current object is counted as a violation (the run fails on any).
// `ffn_moe_topk-N` (int32 [n_expert_used, n_tokens], a non-contiguous view of the argsort)
// is wanted too and read at ask=false, row by row through nb[1].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "adapters/llama/objects.hpp"

struct ggml_tensor;

namespace resid {

struct GgufSummary {
  std::vector<TensorInfo> tensors;  // absolute offsets
  uint64_t data_offset = 0;
  uint64_t file_bytes = 0;
  std::string architecture;
  uint32_t n_expert = 0, n_expert_used = 0;
};

// Reads the GGUF header and tensor table (no tensor data). InputError (exit 2) on a file
// that is missing, not a GGUF, or truncated.
GgufSummary read_gguf(const std::string& path);

class StepListener {
 public:
  virtual ~StepListener() = default;
  // A graph evaluation starts: its first node (embd) is about to be computed.
  // `embd_rows`: the chunks of the token-embedding rows the batch's tokens select (what
  // GET_ROWS reads), or nullopt when the node could not be read (then the whole object).
  virtual void pass_started(std::optional<std::vector<uint32_t>> embd_rows) = 0;
  // Every node before object `object`'s first weight read is computed, none after.
  virtual void object_entered(uint32_t object) = 0;
  // ffn_moe_topk-<layer>: per token, the selected experts.
  virtual void routes(int layer, std::vector<std::vector<int32_t>> experts) = 0;
};

class EvalObserver {
 public:
  EvalObserver(const Manifest& m, StepListener& listener) : m_(m), l_(listener) {}
  // Where llama.cpp's model mapping lives (the pager region, or the kernel's mapping).
  void set_mapping(uintptr_t base, uint64_t length) {
    base_ = base;
    len_ = length;
  }
  // The ggml_backend_sched_eval_callback; user_data is the EvalObserver.
  static bool callback(ggml_tensor* t, bool ask, void* user_data);
  // The graph evaluation returned (no object is current until the next pass starts).
  void end_pass() { cur_ = -1; }
  int current() const { return cur_; }

  struct Stats {
    uint64_t nodes = 0;            // ask=true calls
    uint64_t boundaries = 0;       // object entries (pass starts included)
    uint64_t weight_reads = 0;     // node sources inside the model mapping
    uint64_t foreign_reads = 0;    // ... of a tensor not in the current object
    uint64_t outside_reads = 0;    // weight-buffer sources outside the model mapping
    uint64_t embd_rows_read = 0;   // passes whose embd token ids were read (exact embd accesses)
    uint64_t embd_rows_unread = 0; // passes where they could not be (the whole object instead)
    std::string first_violation;   // the first foreign or outside read, described
  };
  const Stats& stats() const { return st_; }

 private:
  bool ask(ggml_tensor* t);
  void done(ggml_tensor* t);
  void audit_sources(const ggml_tensor* t);
  std::optional<std::vector<uint32_t>> embd_rows(const ggml_tensor* t) const;

  const Manifest& m_;
  StepListener& l_;
  uintptr_t base_ = 0;
  uint64_t len_ = 0;
  int cur_ = -1;                      // current object index, -1 between passes
  const ggml_tensor* pending_ = nullptr;
  int pending_obj_ = -1;
  Stats st_;
};

}  // namespace resid
