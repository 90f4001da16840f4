// One `residctl generate` run (built with llama.cpp only). The driver thread loads the model
// and decodes (generate_llama.cpp); llama.cpp's eval callback reaches it through the llama
// adapter as object steps (generate_steps.cpp), which it turns into the pager's consumers
// and consumption signals and the access trace; the main thread sets up the budget and the
// pager and watches the run (generate.cpp); the run directory is written last
// (generate_record.cpp).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "adapters/llama/adapter.hpp"
#include "adapters/llama/mapping.hpp"
#include "adapters/llama/objects.hpp"
#include "core/latency.hpp"
#include "drivers/generate/generate.hpp"
#include "llama.h"
#include "pager/signal_audit.hpp"
#include "pager/trace.hpp"

namespace resid {

constexpr uint32_t kAuditPasses = 3;  // the prefill and the first two decode passes

// --huge-chunks, resolved: `move` by default when chunks are whole huge pages (2 MiB
// multiples) and the region is not protected, `off` otherwise; an explicit mode is taken as given (the pager refuses what
// the kernel or the chunk size cannot do: exit 2, never a fallback).
HugeChunks huge_mode(const GenerateConfig& c);
std::string one_line(std::string s);
// The last error llama.cpp or ggml logged ("" if none); their log is kept, not printed.
std::string llama_log_error();
void clear_llama_log_error();
void capture_llama_log();
// InputError (exit 2, one line naming the model) unless llama.cpp loads the model's header
// and vocabulary: an architecture the pinned llama.cpp does not know is said here.
void check_loadable(const std::string& model, const GgufSummary& g);
// The text of `tokens` (no special tokens rendered).
std::string detokenize(const llama_vocab* vocab, const std::vector<llama_token>& tokens);

class GenerateRun final : public StepListener {
 public:
  GenerateRun(const GenerateConfig& cfg, Manifest m, GgufSummary g);
  int execute();

  // ---- StepListener (the driver thread, inside llama_decode) ---------------------------
  void pass_started(std::optional<std::vector<ChunkId>> embd_rows) override;
  void object_entered(uint32_t obj) override;
  void routes(int layer, std::vector<std::vector<int32_t>> experts) override;
  void tensors_consumed(uint32_t object, const std::vector<uint32_t>& tensors) override;
  void tensor_reread(uint32_t object, uint32_t tensor) override;

 private:
  // --fault held-consumer (generate_cells.cpp): the extra consumer the driver keeps on one
  // chunk past its step's end, and the Plan's answers to reusing it meanwhile.
  struct HeldCell {
    bool fired = false, released = false;
    ChunkId chunk = 0;
    uint64_t step = 0;        // the step whose chunk it is (the fire point)
    uint64_t until = 0;       // the last step it is held through
    uint64_t held_steps = 0;  // steps held beyond its own
    uint64_t attempts = 0, refusals = 0;  // reuse asked of the Plan / refused by it (consumers-live)
    PlanError other = PlanError::None;    // a different answer, when there was one
    bool recycled = false;                // the Plan agreed to reuse it: the cell failed
  };
  // --fault shutdown-live-consumer: the Plan's answer to a shutdown under a live consumer.
  struct ShutdownCell {
    bool fired = false;
    ChunkId chunk = 0;
    PlanError answer = PlanError::None;
  };
  // One request of --warm-request (generate_warm.cpp).
  struct RequestLog {
    std::string kind;
    std::vector<llama_token> tokens;
    std::string tokens_sha256, logits_sha256;
    uint64_t misses = 0, physical_bytes_read = 0;
  };

  // --draft (generate_speculative.cpp): the draft model and what the rounds did.
  struct Speculative {
    llama_model* model = nullptr;
    llama_context* ctx = nullptr;
    size_t n_past = 0;  // tokens of the committed prefix in the draft's KV cache
    uint64_t traversals = 0, drafted = 0, accepted = 0, full_groups = 0, rows_traversed = 0;
    uint64_t draft_ns = 0, load_ns = 0, load_bytes_read = 0;
  };

  struct RecycleProbe {
    bool fired = false;
    ChunkId chunk = 0;
    PlanError answer = PlanError::None;
    bool resident_after = false;
  };

  // generate.cpp: budget, pager, the watch, the verdict.
  void open_pager();
  void load_graph_plan();
  std::string watch_error();
  std::string verdict();
  // generate_steps.cpp
  size_t reserve_records() const;
  void finish_pass();
  // What a step holds (its consumers, entered before the step and left after it): the
  // batch's embedding rows for embd, the declared chunks otherwise.
  const std::vector<ChunkId>& access_chunks(uint32_t obj) const { return obj == 0 ? embd_access_ : steps_[obj]; }
  // What a step read (its access records, Belady's reference): a MoE layer whose routes were
  // read reads its router-picked experts' slices only, every other step what it holds.
  const std::vector<ChunkId>& read_chunks(uint32_t obj);
  nlohmann::json oversize_objects() const;
  bool oversize(uint32_t obj) const { return pager_ && access_chunks(obj).size() > fit_chunks_; }
  void enter(uint32_t obj);
  void leave(uint32_t obj);
  // Tensor signals: per object step, how many of its tensors cover each of its chunks
  // (aligned with steps_), and the chunks the current step already let go.
  void build_tensor_cover();
  void start_early(int obj);
  void signal(uint64_t consumed, uint64_t next, bool next_oversize);
  void record_accesses(uint32_t obj, uint64_t step);
  void probe_kernel(uint32_t obj);
  void compute_chunk_runs(const MappingReport& mr);
  void touch_progress();
  void maybe_probe_recycle(uint32_t old);
  std::string probe_error() const;
  // generate_cells.cpp: the driver cells held-consumer and shutdown-live-consumer.
  void hold_for_cell(uint32_t old, uint64_t consumed, const std::vector<ChunkId>& next, bool next_oversize);
  void ask_held_reuse(uint64_t consumed);
  void release_held();
  void probe_shutdown();
  std::string driver_cell_error() const;
  void add_driver_cell_json(nlohmann::json& fault) const;
  // generate_warm.cpp: --warm-request.
  void serve_warm_request(llama_context* ctx, const llama_vocab* vocab);
  void reset_request(llama_context* ctx);
  RequestLog request_log(const char* kind, const llama_vocab* vocab, uint64_t misses0, uint64_t io0) const;
  nlohmann::json requests_json() const;
  // generate_speculative.cpp: --draft.
  bool load_draft(const llama_vocab* target_vocab, ggml_threadpool* tp);
  void free_draft();
  std::vector<llama_token> propose(const std::vector<llama_token>& hist, uint32_t k);
  void generate_speculative(llama_context* ctx);
  nlohmann::json speculative_json() const;
  // generate_llama.cpp: the driver thread.
  void drive();
  bool load_model(llama_model*& model);
  bool make_context(llama_model* model, llama_context*& ctx, ggml_threadpool*& tp);
  bool tokenize_prompt(const llama_vocab* vocab);
  void generate_tokens(llama_context* ctx, const llama_vocab* vocab);
  void take_row(uint32_t i, const float* row);
  int32_t argmax(const float* row) const;
  std::string stop_reason() const;
  void progress_line(uint32_t done, bool final);
  // generate_record.cpp
  nlohmann::json record(const std::string& error);
  nlohmann::json counters_json();
  nlohmann::json model_json() const;
  nlohmann::json generation_json() const;
  nlohmann::json signal_audit_json() const;
  // generate_identity.cpp
  nlohmann::json identity_json() const;
  nlohmann::json consumer_json() const;
  nlohmann::json destination_json() const;
  void write_outputs(const std::string& error, bool with_generation);
  void write_outputs_or_throw(const std::string& error, bool with_generation);
  // tokens.json's bytes and logits.sha256's (one line per row), for a request's tokens/rows.
  std::string tokens_file(const std::vector<llama_token>& tokens, const std::string& text) const;
  static std::string logits_sums(const std::vector<std::string>& row_sha);
  void write_generation();
  [[noreturn]] void fail_now(const std::string& error);

  const GenerateConfig& cfg_;
  const PagerArmConfig& a_;
  Manifest m_;
  GgufSummary g_;
  std::vector<std::vector<ChunkId>> steps_;
  uint32_t S_;
  SignalAudit audit_;
  Trace trace_;
  EvalObserver observer_;

  std::unique_ptr<Pager> pager_;
  std::shared_ptr<const FaultReport> fault_report_;  // a source cell's decorator (--fault)
  PagerBudget budget_;
  std::optional<uint64_t> budget_chunks_;
  uint64_t fit_chunks_ = UINT64_MAX;  // the largest step held whole (live consumers on every chunk)
  std::optional<uint64_t> region_huge_bytes_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  RunMonitor monitor_;

  // Driver-thread state.
  uint64_t pass_ = 0;
  bool pass_open_ = false;
  int cur_ = -1;
  uint64_t cur_step_ = 0;
  bool cur_entered_ = false;          // the current step's chunks were entered (not oversize)
  std::vector<ChunkId> embd_access_;  // this pass's embd rows' chunks
  std::vector<std::vector<uint16_t>> cover_;  // [object][i]: tensors of the object over steps_[object][i]
  int early_obj_ = -1;                        // the object remaining_/left_ are of
  std::vector<uint16_t> remaining_;           // its tensors over each chunk not yet consumed
  std::vector<uint8_t> left_;                 // its chunks let go early (leave_consumed)
  uint64_t early_leaves_ = 0;                 // chunks let go early, over the run
  uint64_t embd_rows_unread_ = 0;
  std::vector<std::vector<int32_t>> pass_experts_;  // per layer: the experts routed in this pass
  std::vector<uint8_t> pass_routed_;                // per layer: its routes were read this pass
  std::vector<ChunkId> routed_read_;                // read_chunks' result for a routed step
  uint64_t moe_steps_routed_ = 0, moe_steps_unrouted_ = 0;
  std::vector<uint8_t> entry_miss_;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> chunk_runs_;
  std::vector<unsigned char> mincore_buf_;
  const std::byte* kmap_base_ = nullptr;
  uint64_t sequence_errors_ = 0;
  std::optional<std::string> audit_error_;
  RecycleProbe probe_;
  HeldCell held_;
  ShutdownCell shut_cell_;
  std::vector<RequestLog> requests_;
  Speculative spec_;
  bool write_logits_ = true;  // take_row writes logits.f32 (the primary request only)
  uint32_t reset_errors_ = 0;
  std::string reset_error_;
  std::mutex routes_mu_;
  std::vector<std::string> routes_;
  std::vector<llama_token> prompt_tokens_, tokens_;
  std::vector<std::string> row_sha_;
  std::string text_;
  int32_t n_vocab_ = 0;
  uint64_t prefill_ns_ = 0, decode_ns_ = 0, decode_wall_ns_ = 0, load_ns_ = 0, context_ns_ = 0;
  LatencyHistogram token_hist_;  // each decode token's time (llama_decode to its argmax): a token's latency
  std::string logits_tmp_;
  int logits_fd_ = -1;
  std::string input_error_;  // llama.cpp refused the model: exit 2
  std::string run_error_;    // the run failed: exit 1
  bool loaded_ = false;

  // Shared with the monitor.
  std::atomic<uint64_t> last_progress_ns_{0};
  std::atomic<uint64_t> accesses_{0}, misses_{0}, signals_{0}, steps_done_{0}, passes_done_{0};
  std::atomic<uint64_t> io0_{0}, io_end_{0}, t_start_{0}, t_end_{0};
  std::atomic<bool> in_generation_{false};
};

}  // namespace resid
