// The llama adapter (built with RESID_WITH_LLAMA): object discovery from the GGUF file, and
// the consumption signal and router routes from llama.cpp's eval callback.
//
// The eval callback (ggml_backend_sched_eval_callback) is asked, for every graph node in
// order, whether the caller wants that node's result (ask=true); the scheduler computes the
// nodes up to and including the first wanted one as one group, then calls back with
// ask=false. So an ask=true call comes before its whole group is computed, and the
// ask=false call of a wanted node comes after every node up to it is computed and before
// any later node is.
//
// The object boundaries come from the graph llama.cpp actually builds, not from node names
// of one architecture. The first pass of each graph shape (the batch's token count: the
// prefill, then the first decode pass) is a discovery pass: every node is wanted, so at the
// ask=true call of a node all earlier nodes are computed; the first node that reads a weight
// of the next declared object enters that object there, and the node before it is learned
// as that object's boundary (its name and its occurrence in the pass: llama.cpp reuses
// names). Later passes of the same shape want only the learned boundary nodes and enter
// each object at its boundary's ask=false call: after every node before the object's first
// weight read is computed, before any of its own. A discovery pass that saw an object out
// of order or a foreign read is not learned (the next pass of that shape discovers again).
//
// The first node of a pass is the token embedding's GET_ROWS: pass start, enter embd; its
// ask=true call also reads the batch's token ids (src[1], set before the graph runs): the
// rows, hence the chunks, the step really reads. Every node's weight reads are checked at
// its ask=true call against the current object (a read of a tensor outside it is a
// violation and the run fails on any). `ffn_moe_topk-N` (int32 [n_expert_used, n_tokens],
// a non-contiguous view of the argsort) is wanted too and read at ask=false, row by row: the
// routes. A node that reads an expert tensor of layer N (the expert kernel, MUL_MAT_ID) in a
// pass where no `ffn_moe_topk-N` was read before it, or whose expert ids (src[2]) are another
// tensor, is a route violation: the routes would not be the selection the experts ran with,
// and the run stops, naming the node. Every node also goes to the graph identity (the
// consumer record) and every weight read to the demand record (demand.json).
//
// Tensor signals (set_tensor_signals, `residctl generate --consumption tensor`): a discovery
// pass also learns, for every weight tensor of the objects after embd, the last node of the
// pass that reads it while its object is current (its release node). Later passes of the
// shape want the release nodes too, and at a release node's ask=false call (the node and
// every node before it computed, none after) the listener hears tensors_consumed: nothing
// later in the pass reads those tensors. A later read of a released tensor in the same pass
// is a violation (the learned plan was wrong): the listener hears tensor_reread first (the
// chunks are held again), and the run fails at its end like a foreign read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/llama/demand.hpp"
#include "adapters/llama/graph_identity.hpp"
#include "adapters/llama/objects.hpp"

struct ggml_tensor;

namespace resid {

struct GgufSummary {
  std::vector<TensorInfo> tensors;  // absolute offsets
  uint64_t data_offset = 0;
  uint64_t file_bytes = 0;
  std::string architecture;
  uint32_t n_expert = 0, n_expert_used = 0;
  std::optional<uint32_t> expert_gating_func;  // <arch>.expert_gating_func, when the file says
};

// Reads the GGUF header and tensor table (no tensor data). InputError (exit 2) on a file
// that is missing, not a GGUF, truncated, without general.architecture, or one part of a
// split GGUF (split.count > 1).
GgufSummary read_gguf(const std::string& path);

// After the load, before any run: every weight llama.cpp holds must be used in place from
// the file, i.e. lie in the model's mapping [base, base + length) at the offset the GGUF's
// tensor table gives it. Otherwise (repacked into another buffer, converted, copied) the pager
// would page bytes llama.cpp never reads. `weights`: llama.cpp's (name, tensor) list. Returns
// the first weight that is not, described (its buffer named), or nullopt.
std::optional<std::string> weight_not_file_backed(const std::vector<std::pair<std::string, ggml_tensor*>>& weights,
                                                  const Manifest& m, uintptr_t base, uint64_t length);

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
  // Tensor signals: nothing later in this pass reads `tensors` (indexes into
  // Manifest::tensors, all of object `object`, the current one).
  virtual void tensors_consumed(uint32_t object, const std::vector<uint32_t>& tensors) {
    (void)object;
    (void)tensors;
  }
  // Tensor signals: a node is about to read `tensor` (of the current object `object`) after
  // its release (a violation; the run fails at its end). Its chunks must be held again until
  // the step ends, or the pager would evict them under the reading threads.
  virtual void tensor_reread(uint32_t object, uint32_t tensor) {
    (void)object;
    (void)tensor;
  }
};

class EvalObserver {
 public:
  EvalObserver(const Manifest& m, StepListener& listener);
  // The router's selection node, `<name>-N` (default ffn_moe_topk); another name is the route
  // check's negative control (--route-node): no routes are read, the expert kernel's first
  // read of an expert tensor is a route violation.
  void set_route_node(std::string name) { route_node_ = std::move(name); }
  const std::string& route_node() const { return route_node_; }
  // Learn and signal release nodes (header). Off: object granularity only.
  void set_tensor_signals(bool on) { tensor_signals_ = on; }
  bool tensor_signals() const { return tensor_signals_; }
  const DemandRecord& demand() const { return demand_; }
  const GraphIdentity& graph() const { return graph_; }
  // Where llama.cpp's model mapping lives (the pager region, or the kernel's mapping).
  void set_mapping(uintptr_t base, uint64_t length) {
    base_ = base;
    len_ = length;
  }
  // The ggml_backend_sched_eval_callback; user_data is the EvalObserver.
  static bool callback(ggml_tensor* t, bool ask, void* user_data);
  // The graph evaluation returned (no object is current until the next pass starts).
  void end_pass();
  // The learned boundaries of every graph shape (JSON, `residctl generate --graph-plan-out`),
  // and boundaries learned by an earlier run (`--graph-plan`): those shapes need no discovery
  // pass. InputError when the plan names an object this model does not have.
  nlohmann::json plans_json() const;
  void load_plans(const nlohmann::json& j);
  // `--graph-plan`'s text (no I/O; `path` only names it in messages), parsed and loaded.
  // Contract: loads a graph plan of this model, or throws InputError naming `path`; no other
  // exception, whatever the text.
  void load_plans_text(std::string_view text, const std::string& path);
  int current() const { return cur_; }

  struct Stats {
    uint64_t nodes = 0;            // ask=true calls
    uint64_t boundaries = 0;       // object entries (pass starts included)
    uint64_t weight_reads = 0;     // node sources inside the model mapping
    uint64_t foreign_reads = 0;    // ... of a tensor not in the current object
    uint64_t outside_reads = 0;    // weight-buffer sources outside the model mapping
    uint64_t embd_rows_read = 0;   // passes whose embd token ids were read (exact embd accesses)
    uint64_t embd_rows_unread = 0; // passes where they could not be (the whole object instead)
    uint64_t discovery_passes = 0; // passes that learned the boundaries of their graph shape
    uint64_t out_of_order = 0;     // discovery: a weight of a later object read before its turn
    std::string first_violation;   // the first foreign or outside read, described
    uint64_t route_events = 0;     // route nodes read (one per layer and pass)
    uint64_t route_violations = 0; // expert-tensor reads without their layer's routes
    std::string first_route_violation;
    uint64_t releases = 0;            // tensor signals: release nodes reached (tensors_consumed calls)
    uint64_t tensors_released = 0;    // ... and the tensors they released
    uint64_t reads_after_release = 0; // weight reads of a tensor released earlier in the pass
  };
  const Stats& stats() const { return st_; }

 private:
  // A learned boundary: object `object` is entered after the `occurrence`-th node named
  // `name` of the pass.
  struct Boundary {
    std::string name;
    uint32_t occurrence = 0;
    uint32_t object = 0;
  };
  // A learned release node: after the `occurrence`-th node named `name` of the pass, nothing
  // later reads `tensors` (of object `object`).
  struct Release {
    std::string name;
    uint32_t occurrence = 0;
    uint32_t object = 0;
    std::vector<uint32_t> tensors;
  };
  // What a discovery pass learns about one graph shape.
  struct ShapePlan {
    std::vector<Boundary> boundaries;
    std::vector<Release> releases;  // in node order
    std::vector<uint32_t> read_order;  // every tensor read while its object is current, by its last read
  };
  // The last read of a tensor seen by a discovery pass: node and its index in the pass.
  struct LastRead {
    std::string name;
    uint32_t occurrence = 0;
    uint64_t node = 0;
    int object = -1;
  };

  bool ask(ggml_tensor* t);
  void done(ggml_tensor* t);
  void start_pass(ggml_tensor* first);
  void discover(const ggml_tensor* t);
  bool is_boundary(const ggml_tensor* t, uint32_t occurrence);
  bool is_release(const ggml_tensor* t, uint32_t occurrence);
  void learn_read(const ggml_tensor* t, uint32_t tensor);
  std::vector<Release> learned_releases() const;
  std::vector<uint32_t> learned_read_order() const;
  std::vector<Release> prune_releases(std::map<uint64_t, Release>& by_node) const;
  void release(const Release& r);
  void check_released(const ggml_tensor* t, uint32_t tensor);
  std::optional<uint32_t> next_object_read(const ggml_tensor* t) const;
  bool reads_token_embedding_rows(const ggml_tensor* t) const;
  void audit_sources(const ggml_tensor* t);
  void check_routes(const ggml_tensor* t, uint32_t tensor);
  void read_routes(ggml_tensor* t, int layer);
  std::optional<int> route_layer(const ggml_tensor* t) const;
  std::optional<std::vector<uint32_t>> embd_rows(const ggml_tensor* t) const;

  const Manifest& m_;
  StepListener& l_;
  uintptr_t base_ = 0;
  uint64_t len_ = 0;
  bool in_pass_ = false;
  int cur_ = -1;                      // current object index, -1 between passes
  const ggml_tensor* pending_ = nullptr;
  int pending_obj_ = -1;
  // Boundaries per graph shape (the batch's token count), learned by discovery passes.
  std::map<int64_t, ShapePlan> plans_;
  int64_t shape_ = -1;
  bool discovering_ = false;
  bool clean_ = true;                 // this discovery pass saw nothing out of order or foreign
  std::vector<Boundary> learning_;
  size_t next_boundary_ = 0;
  bool tensor_signals_ = false;
  size_t next_release_ = 0;
  const ggml_tensor* pending_release_ = nullptr;
  size_t pending_release_idx_ = 0;
  uint32_t node_occurrence_ = 0;       // the occurrence of the node being asked about
  uint64_t pass_node_ = 0;             // its index in the pass
  std::vector<LastRead> last_read_;    // discovery: per tensor
  std::vector<uint8_t> released_;      // per tensor: released in this pass
  std::unordered_map<std::string, uint32_t> occurrences_;  // of each node name in this pass
  std::string prev_name_;
  uint32_t prev_occurrence_ = 0;
  std::string route_node_ = "ffn_moe_topk";
  std::vector<int> expert_layer_;        // per tensor: its layer when stacked per expert, else -1
  std::vector<uint8_t> routed_;          // per layer: its routes were read in this pass
  DemandRecord demand_;
  GraphIdentity graph_;
  Stats st_;
};

}  // namespace resid
