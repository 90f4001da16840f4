#include "drivers/generate.hpp"

#include "core/clock.hpp"
#include "core/errors.hpp"

#if !RESID_WITH_LLAMA

namespace resid {

bool generate_available() { return false; }

int run_generate(const GenerateConfig&) {
  throw InputError(
      "this residctl was built without llama.cpp (RESID_WITH_LLAMA=OFF): `generate` is unavailable; "
      "rebuild with -DCMAKE_PREFIX_PATH=<llama.cpp install prefix> -DRESID_WITH_LLAMA=ON");
}

}  // namespace resid

#else  // RESID_WITH_LLAMA

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "adapters/llama/adapter.hpp"
#include "adapters/llama/mapping.hpp"
#include "adapters/llama/objects.hpp"
#include "core/fsutil.hpp"
#include "core/mincore.hpp"
#include "core/proc_io.hpp"
#include "core/run_record.hpp"
#include "core/sha256.hpp"
#include "drivers/pager_arm.hpp"
#include "drivers/record.hpp"
#include "ggml-cpu.h"
#include "ggml.h"
#include "llama.h"
#include "pager/pager.hpp"
#include "pager/record.hpp"
#include "pager/trace.hpp"
#include "policy/declared.hpp"

#ifndef RESID_LLAMA_COMMIT
#define RESID_LLAMA_COMMIT "unknown"
#endif

namespace resid {

bool generate_available() { return true; }

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kAuditPasses = 3;  // the prefill and the first two decode passes

// --huge-chunks, resolved: `move` by default when chunks are whole huge pages (2 MiB
// multiples), `off` otherwise; an explicit mode is taken as given (the pager refuses what
// the kernel or the chunk size cannot do: exit 2, never a fallback).
HugeChunks huge_mode(const GenerateConfig& c) {
  return c.huge.value_or(c.chunk_size % (2u << 20) == 0 ? HugeChunks::Move : HugeChunks::Off);
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// llama.cpp's and ggml's log: kept (not printed), so stderr carries only the contract's lines;
// the last error is quoted when a load fails.
struct LogCapture {
  std::mutex mu;
  std::string last_error;
  std::string pending;
  static void cb(ggml_log_level level, const char* text, void* user) {
    auto* self = static_cast<LogCapture*>(user);
    std::lock_guard lk(self->mu);
    if (level == GGML_LOG_LEVEL_CONT) {
      self->pending += text;
    } else {
      self->pending = text;
    }
    if (level == GGML_LOG_LEVEL_ERROR || (level == GGML_LOG_LEVEL_CONT && !self->last_error.empty()))
      self->last_error = one_line(self->pending);
  }
  std::string error() {
    std::lock_guard lk(mu);
    return last_error;
  }
};
LogCapture g_log;

nlohmann::json config_json(const GenerateConfig& c) {
  return {{"model", c.model},
          {"out", c.out},
          {"arm", to_string(c.arm)},
          {"budget_bytes", c.budget_bytes ? nlohmann::json(*c.budget_bytes) : nlohmann::json(nullptr)},
          {"chunk_size", c.chunk_size},
          {"prompt", c.prompt},
          {"tokens", c.tokens},
          {"threads", c.threads},
          {"ctx", c.ctx},
          {"source", to_string(c.source)},
          {"windows", source_options(c.source, c.windows, c.depth).windows},
          {"depth", source_options(c.source, c.windows, c.depth).depth},
          {"prefetch_depth", c.prefetch_depth},
          {"eager_reconcile", c.eager_reconcile},
          {"watchdog_s", c.watchdog_s},
          {"calibrate", c.calibrate},
          {"huge_chunks", c.huge ? to_string(*c.huge) : "default"}};
}

// The run: the driver thread loads the model and generates; the main thread watches it.
class Run final : public StepListener {
 public:
  Run(const GenerateConfig& cfg, Manifest m, GgufSummary g)
      : cfg_(cfg),
        m_(std::move(m)),
        g_(std::move(g)),
        steps_(m_.step_chunks()),
        S_(m_.steps_per_pass()),
        audit_(m_.chunks, steps_),
        trace_(reserve_records()),
        observer_(m_, *this) {}

  int execute();

  // ---- StepListener (the driver thread, inside llama_decode) --------------------------
  void pass_started(std::optional<std::vector<ChunkId>> embd_rows) override {
    if (pass_open_) finish_pass();  // a second graph within one llama_decode (long prompt)
    pass_open_ = true;
    cur_ = 0;
    cur_step_ = pass_ * S_;
    // The embd step reads the rows of this batch's tokens, nothing else of the embedding:
    // those chunks are its accesses (the reference trace) and what it holds.
    embd_access_ = embd_rows ? std::move(*embd_rows) : steps_[0];
    if (!embd_rows) ++embd_rows_unread_;
    if (!pager_) probe_kernel(0);
    cur_entered_ = !oversize(0);
    if (pager_) pager_->set_step_oversize(!cur_entered_);
    if (cur_entered_) enter(0);
    touch_progress();
  }

  void object_entered(uint32_t obj) override {
    if (!pass_open_ || static_cast<int>(obj) != cur_ + 1) {
      ++sequence_errors_;
      if (!pass_open_ || static_cast<int>(obj) <= cur_) return;
    }
    const uint64_t consumed = cur_step_;
    const uint32_t old = static_cast<uint32_t>(cur_);
    const uint64_t next = pass_ * S_ + obj;
    record_accesses(old, consumed);    // arm A: the old object's entry probe, so first
    if (!pager_) probe_kernel(obj);
    const bool old_entered = cur_entered_;
    cur_entered_ = !oversize(obj);
    if (cur_entered_) enter(obj);      // the new chunks are held before the old ones are let go
    signal(consumed, next, !cur_entered_);
    if (old_entered) maybe_probe_recycle(old);
    if (old_entered) leave(old);
    cur_ = static_cast<int>(obj);
    cur_step_ = next;
  }

  void routes(int layer, std::vector<std::vector<int32_t>> experts) override {
    nlohmann::ordered_json j = {{"pass", pass_}, {"layer", layer}, {"experts", experts}};
    std::lock_guard lk(routes_mu_);  // fail_now may write them from the monitor thread
    routes_.push_back(j.dump());
  }

 private:
  size_t reserve_records() const {
    uint64_t per_pass = 0;
    for (const auto& s : steps_) per_pass += s.size();
    const uint64_t passes = cfg_.tokens + 2;
    return static_cast<size_t>(passes * (per_pass * 4 + S_) + 1024);
  }

  // The graph evaluation of this pass returned: its last object is consumed.
  void finish_pass() {
    if (!pass_open_) return;
    const uint64_t consumed = cur_step_;
    const uint32_t old = static_cast<uint32_t>(cur_);
    if (old + 1 != S_) ++sequence_errors_;  // the pass ended before its output object
    record_accesses(old, consumed);
    signal(consumed, (pass_ + 1) * S_, false);
    if (cur_entered_) leave(old);
    cur_entered_ = false;
    pass_open_ = false;
    cur_ = -1;
    observer_.end_pass();
    passes_done_.store(++pass_);
    if (pass_ == kAuditPasses && !audit_error_) audit_error_ = startup_audit_error(audit_, m_, kAuditPasses);
  }

  // The chunks object `obj`'s step reads in this pass: the declared chunks, except for embd,
  // whose step reads only the rows of the batch's tokens.
  const std::vector<ChunkId>& access_chunks(uint32_t obj) const { return obj == 0 ? embd_access_ : steps_[obj]; }

  // The objects (other than embd, decided per pass by its rows) that run oversize.
  nlohmann::json oversize_objects() const {
    nlohmann::json a = nlohmann::json::array();
    if (!pager_) return a;
    for (uint32_t o = 1; o < S_; ++o)
      if (steps_[o].size() > fit_chunks_) a.push_back(m_.objects[o].name);
    return a;
  }

  // Oversize: the step's chunks cannot all be held resident at this budget, so none gets a
  // live consumer; the pager pins the chunk each compute thread last faulted on instead.
  bool oversize(uint32_t obj) const { return pager_ && access_chunks(obj).size() > fit_chunks_; }

  void enter(uint32_t obj) {
    if (pager_)
      for (ChunkId c : access_chunks(obj)) pager_->enter(c);
  }
  void leave(uint32_t obj) {
    if (pager_)
      for (ChunkId c : access_chunks(obj)) pager_->leave(c);
  }

  void signal(uint64_t consumed, uint64_t next, bool next_oversize) {
    audit_.record(consumed);
    signals_.fetch_add(1, std::memory_order_relaxed);
    if (pager_) pager_->step_boundary(consumed, next, next_oversize);
    touch_progress();
  }

  void record_accesses(uint32_t obj, uint64_t step) {
    const auto& cs = access_chunks(obj);
    for (size_t i = 0; i < cs.size(); ++i) {
      const bool miss = pager_ ? pager_->demand_filled_in(cs[i], step) : entry_miss_.at(i) != 0;
      trace_.append(step, cs[i], TraceKind::Access, miss ? kTraceMiss : 0);
      misses_.fetch_add(miss ? 1 : 0, std::memory_order_relaxed);
    }
    accesses_.fetch_add(cs.size(), std::memory_order_relaxed);
    steps_done_.fetch_add(1, std::memory_order_relaxed);
  }

  // Arm A: a chunk access is a miss when any mapped page of the chunk is absent just before
  // the object's step (the pages llama.cpp unmapped are not asked about).
  void probe_kernel(uint32_t obj) {
    const auto& cs = access_chunks(obj);
    entry_miss_.assign(cs.size(), 0);
    if (!kmap_base_) return;
    for (size_t i = 0; i < cs.size(); ++i) {
      for (const auto& [b, e] : chunk_runs_[cs[i]]) {
        const PageCount pc = count_resident(kmap_base_ + b, e - b, mincore_buf_);
        if (!pc.ok || pc.present < pc.pages) {
          entry_miss_[i] = 1;
          break;
        }
      }
    }
  }

  // Mapped page runs of every chunk of llama.cpp's kernel mapping (arm A).
  void compute_chunk_runs(const MappingReport& mr) {
    chunk_runs_.assign(m_.chunks, {});
    const uint64_t mapped_end = (mr.length + kPage - 1) / kPage * kPage;
    std::vector<std::pair<uint64_t, uint64_t>> holes = mr.unmapped_fragments;
    for (auto& h : holes) {
      h.first = h.first / kPage * kPage;
      h.second = (h.second + kPage - 1) / kPage * kPage;
    }
    std::sort(holes.begin(), holes.end());
    for (uint32_t c = 0; c < m_.chunks; ++c) {
      uint64_t b = static_cast<uint64_t>(c) * m_.chunk_size;
      const uint64_t e = std::min(b + m_.chunk_size, mapped_end);
      for (const auto& [hb, he] : holes) {
        if (he <= b || hb >= e) continue;
        if (hb > b) chunk_runs_[c].emplace_back(b, hb);
        b = std::max(b, he);
      }
      if (b < e) chunk_runs_[c].emplace_back(b, e);
    }
  }

  void touch_progress() { last_progress_ns_.store(now_ns(), std::memory_order_relaxed); }

  // --fault recycle-live@N (a negative control): in pass N, at the first
  // object change where the object just consumed still holds its chunks (its consumers leave
  // right after), ask the Plan to recycle one of its resident chunks: it must refuse
  // (consumers-live), and the chunk stays resident and untouched.
  void maybe_probe_recycle(uint32_t old) {
    if (cfg_.fault.cell != FaultCell::RecycleLive || probe_.fired || pass_ != cfg_.fault.at || !pager_) return;
    for (ChunkId c : access_chunks(old)) {
      if (!pager_->resident(c)) continue;
      probe_.fired = true;
      probe_.chunk = c;
      probe_.answer = pager_->try_recycle(c);
      probe_.resident_after = pager_->resident(c);
      return;
    }
  }
  struct RecycleProbe {
    bool fired = false;
    ChunkId chunk = 0;
    PlanError answer = PlanError::None;
    bool resident_after = false;
  };

  void drive();  // the driver thread
  void progress_line(uint32_t done, bool final);
  nlohmann::json record(bool ok, const std::string& error);
  void write_outputs(bool ok, const std::string& error, bool with_generation);
  [[noreturn]] void fail_now(const std::string& error);

  const GenerateConfig& cfg_;
  Manifest m_;
  GgufSummary g_;
  std::vector<std::vector<ChunkId>> steps_;
  uint32_t S_;
  SignalAudit audit_;
  Trace trace_;
  EvalObserver observer_;

  std::optional<PolicyKind> policy_kind_;
  std::unique_ptr<Pager> pager_;
  uint64_t window_bytes_ = 0, page_table_bytes_ = 0;
  std::optional<uint64_t> budget_chunks_;
  uint64_t min_chunks_ = 0;
  uint64_t fit_chunks_ = UINT64_MAX;  // the largest step held whole (live consumers on every chunk)
  uint64_t huge_reserve_ = 0;         // chunks of budget reserved for MADV_COLLAPSE's transient page
  std::optional<uint64_t> region_huge_bytes_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;

  // Driver-thread state.
  uint64_t pass_ = 0;
  bool pass_open_ = false;
  int cur_ = -1;
  uint64_t cur_step_ = 0;
  bool cur_entered_ = false;          // the current step's chunks were entered (not oversize)
  std::vector<ChunkId> embd_access_;  // this pass's embd rows' chunks
  uint64_t embd_rows_unread_ = 0;
  std::vector<uint8_t> entry_miss_;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> chunk_runs_;
  std::vector<unsigned char> mincore_buf_;
  const std::byte* kmap_base_ = nullptr;
  uint64_t sequence_errors_ = 0;
  std::optional<std::string> audit_error_;
  RecycleProbe probe_;
  std::shared_ptr<const FaultReport> fault_report_;  // a source cell's decorator (--fault)
  std::mutex routes_mu_;
  std::vector<std::string> routes_;
  std::vector<llama_token> prompt_tokens_, tokens_;
  std::vector<std::string> row_sha_;
  std::string text_;
  int32_t n_vocab_ = 0;
  uint64_t prefill_ns_ = 0, decode_ns_ = 0, decode_wall_ns_ = 0, load_ns_ = 0, context_ns_ = 0;
  std::string logits_tmp_;
  int logits_fd_ = -1;
  std::string input_error_;   // llama.cpp refused the model: exit 2
  std::string run_error_;     // the run failed: exit 1
  bool loaded_ = false;

  // Shared with the monitor.
  std::atomic<uint64_t> last_progress_ns_{0};
  std::atomic<uint64_t> accesses_{0}, misses_{0}, signals_{0}, steps_done_{0}, passes_done_{0};
  std::atomic<uint64_t> io0_{0}, io_end_{0}, t_start_{0}, t_end_{0};
  std::atomic<bool> in_generation_{false};
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool driver_done_ = false;
  bool pager_failed_ = false;
};

void Run::progress_line(uint32_t done, bool final) {
  if (!::isatty(2)) return;
  const uint64_t io = proc_read_bytes().value_or(io0_.load()) - io0_.load();
  const PagerStats ps = pager_ ? pager_->stats() : PagerStats{};
  std::fprintf(stderr, "\rresidctl generate: %u/%u tokens, %.1f MB read, %llu faults%s", done, cfg_.tokens,
               static_cast<double>(io) / 1e6, static_cast<unsigned long long>(ps.faults_handled),
               final ? "\n" : "");
  std::fflush(stderr);
}

nlohmann::json Run::record(bool ok, const std::string& error) {
  nlohmann::json j = pager_run_head("generate", ok, error, to_string(cfg_.arm), policy_kind_, pager_.get());
  j["signal"] = "eval-callback";
  j["fault"] = fault_json(cfg_.fault, fault_report_.get());
  j["rejection"] = pager_rejection_json(pager_.get());
  const bool probe = cfg_.fault.cell == FaultCell::RecycleLive;
  if (probe) j["fault"]["fired"] = probe_.fired;
  j["recycle_probe"] = !probe ? nlohmann::json(nullptr)
                       : nlohmann::json{{"pass", cfg_.fault.at},
                                        {"fired", probe_.fired},
                                        {"chunk", probe_.fired ? nlohmann::json(probe_.chunk) : nlohmann::json(nullptr)},
                                        {"answer", probe_.fired ? nlohmann::json(probe_.answer == PlanError::None ? "recycled" : to_string(probe_.answer))
                                                                : nlohmann::json(nullptr)},
                                        {"resident_after", probe_.resident_after}};
  j["config"] = config_json(cfg_);
  j["region"] = {{"path", cfg_.model}, {"bytes", m_.file_bytes}, {"chunk_size", m_.chunk_size}, {"chunks", m_.chunks}};
  j["budget"] = {{"budget_bytes", cfg_.budget_bytes ? nlohmann::json(*cfg_.budget_bytes) : nlohmann::json(nullptr)},
                 {"window_bytes", window_bytes_},
                 {"page_table_bytes", page_table_bytes_},
                 {"budget_chunks", budget_chunks_ ? nlohmann::json(*budget_chunks_) : nlohmann::json(nullptr)},
                 {"min_budget_chunks", min_chunks_},
                 {"fit_chunks", pager_ ? nlohmann::json(fit_chunks_) : nlohmann::json(nullptr)},
                 {"oversize_objects", oversize_objects()},
                 {"huge_reserve_chunks", huge_reserve_}};
  const PagerStats ps = pager_ ? pager_->stats() : PagerStats{};
  const SourceStats ss = pager_ ? pager_->source_stats() : SourceStats{};
  const uint64_t acc = accesses_.load(), mis = misses_.load();
  // Demand fills outside the step they were attributed to (a weight touched out of its
  // declared object): evidence on the signal's exactness, from the trace.
  uint64_t stray = 0;
  for (const auto& r : trace_.sorted()) {
    if (r.kind != static_cast<uint8_t>(TraceKind::DemandFill)) continue;
    const auto& cs = steps_[r.step % S_];
    if (!std::binary_search(cs.begin(), cs.end(), r.chunk)) ++stray;
  }
  j["counters"] = {{"steps", steps_done_.load()},
                   {"accesses", acc},
                   {"hits", acc - mis},
                   {"misses", mis},
                   {"demand_fills", ps.demand_fills},
                   {"prefetch_fills", ps.prefetch_fills},
                   {"prefetch_used", ps.prefetch_used},
                   {"evictions", ps.evictions},
                   {"faults_handled", ps.faults_handled},
                   {"spurious_faults", ps.spurious_faults},
                   {"signals", signals_.load()},
                   {"stray_demand_fills", stray},
                   {"logical_bytes_read", ss.logical_bytes},
                   {"physical_bytes_read", io_end_.load() - io0_.load()},
                   {"max_resident_chunks", ps.max_resident_chunks},
                   {"unmapped_chunks", ps.unmapped_chunks},
                   {"reconcile_checks", ps.reconcile_checks},
                   {"reconcile_mismatches", ps.reconcile_mismatches},
                   {"oversize_steps", ps.oversize_steps},
                   {"pin_moves", ps.pin_moves},
                   {"max_pins", ps.max_pins},
                   {"in_step_refills", ps.in_step_refills},
                   // Compute threads blocked in weight faults: over every fault message (one
                   // per blocked thread, so threads blocked on one chunk each count), the time
                   // from reading it to the wake.
                   {"exposed_source_wait_ns", ps.exposed_wait_ns},
                   {"waited_faults", ps.waited_faults},
                   {"plan_recycle_refusals", ps.plan_recycle_refusals}};
  j["huge_chunks"] = {{"mode", pager_ ? nlohmann::json(to_string(huge_mode(cfg_))) : nlohmann::json(nullptr)},
                      {"move_fills", ps.move_fills},
                      {"move_fallbacks", ps.move_fallbacks},
                      {"move_first_errno", ps.move_first_errno ? nlohmann::json(errno_name(ps.move_first_errno))
                                                               : nlohmann::json(nullptr)},
                      {"collapses", ps.collapses},
                      {"collapse_failures", ps.collapse_failures},
                      {"collapse_first_errno", ps.collapse_first_errno
                                                   ? nlohmann::json(errno_name(ps.collapse_first_errno))
                                                   : nlohmann::json(nullptr)},
                      {"region_huge_bytes_at_end",
                       region_huge_bytes_ ? nlohmann::json(*region_huge_bytes_) : nlohmann::json(nullptr)}};
  j["latency_ns"] = {{"fault_p50", ps.fault_p50_ns}, {"fault_p99", ps.fault_p99_ns}, {"fault_max", ps.fault_max_ns},
                     {"fill_p50", ps.fill_p50_ns},   {"fill_p99", ps.fill_p99_ns}};
  j["source_stats"] = pager_source_json(pager_.get());
  j["plan"] = pager_plan_json(pager_.get());
  j["readahead"] = pager_readahead_json(pager_.get());
  // Load, context and generation (teardown and writing the run directory excluded).
  const uint64_t t0 = t_start_.load(), t1 = t_end_.load();
  j["wall_ns"] = t0 ? (t1 ? t1 : now_ns()) - t0 : 0;
  j["trace"] = {{"file", "trace.bin"}, {"records", trace_.size()}};
  uint64_t tensor_bytes = 0;
  for (const auto& t : m_.tensors) tensor_bytes += t.bytes;
  j["model"] = {{"path", cfg_.model},
                {"bytes", m_.file_bytes},
                {"architecture", g_.architecture},
                {"tensor_bytes", tensor_bytes},
                {"data_offset", m_.data_offset},
                {"n_layer", m_.n_layer},
                {"n_vocab", n_vocab_},
                {"n_expert", g_.n_expert},
                {"n_expert_used", g_.n_expert_used},
                {"tied_output", m_.tied_output}};
  j["llama"] = {{"commit", RESID_LLAMA_COMMIT},
                {"repack_disabled", true},
                {"use_extra_bufts", false},
                {"load_mode", "mmap"},
                {"lazy_mode", "off"},
                {"threadpool", "persistent"},
                {"threads", cfg_.threads},
                {"ctx", cfg_.ctx}};
  const uint64_t passes = passes_done_.load();
  const uint64_t decode_passes = tokens_.size() > 1 ? tokens_.size() - 1 : 0;
  j["generation"] = {{"prompt_tokens", prompt_tokens_.size()},
                     {"tokens", tokens_.size()},
                     {"passes", passes},
                     {"decode_passes", decode_passes},
                     {"load_ns", load_ns_},
                     {"context_ns", context_ns_},
                     {"prefill_ns", prefill_ns_},
                     {"decode_ns", decode_ns_},
                     {"decode_wall_ns", decode_wall_ns_},
                     {"tokens_per_s", decode_ns_ ? static_cast<double>(decode_passes) * 1e9 / static_cast<double>(decode_ns_)
                                                 : 0.0}};
  j["objects"] = m_.objects.size();
  j["steps_per_pass"] = S_;
  j["max_step_chunks"] = m_.max_step_chunks();
  j["mapping"] = model_mapping::to_json(model_mapping::report());
  const auto& os = observer_.stats();
  const auto zero = audit_.zero_signal_chunks();
  j["signal_audit"] = {{"signals", audit_.signals()},
                       {"out_of_order", audit_.out_of_order()},
                       {"sequence_errors", sequence_errors_},
                       {"zero_signal_chunks", zero},
                       {"passes_checked", std::min<uint64_t>(passes, kAuditPasses)},
                       {"nodes", os.nodes},
                       {"boundaries", os.boundaries},
                       {"weight_reads", os.weight_reads},
                       {"foreign_reads", os.foreign_reads},
                       {"outside_reads", os.outside_reads},
                       {"embd_rows_read", os.embd_rows_read},
                       {"embd_rows_unread", os.embd_rows_unread},
                       {"first_violation", os.first_violation.empty() ? nlohmann::json(nullptr)
                                                                      : nlohmann::json(os.first_violation)}};
  return j;
}

void Run::write_outputs(bool ok, const std::string& error, bool with_generation) {
  const auto replace = nlohmann::json::error_handler_t::replace;
  write_file_atomic(cfg_.out + "/objects.json", m_.to_json().dump(2, ' ', false, replace) + "\n");
  if (g_.n_expert > 0) {
    std::string lines;
    {
      std::lock_guard lk(routes_mu_);
      for (const auto& l : routes_) {
        lines += l;
        lines += '\n';
      }
    }
    write_file_atomic(cfg_.out + "/routes.jsonl", lines);
  }
  if (with_generation) {
    if (logits_fd_ >= 0) {
      if (::fsync(logits_fd_) != 0 || ::close(logits_fd_) != 0)
        throw RunError("cannot flush " + logits_tmp_ + ": " + errno_name(errno));
      logits_fd_ = -1;
      if (::rename(logits_tmp_.c_str(), (cfg_.out + "/logits.f32").c_str()) != 0)
        throw RunError("cannot rename " + logits_tmp_ + ": " + errno_name(errno));
    }
    std::string sums;
    for (size_t i = 0; i < row_sha_.size(); ++i) sums += std::to_string(i) + " " + row_sha_[i] + "\n";
    write_file_atomic(cfg_.out + "/logits.sha256", sums);
    nlohmann::json tj = {{"prompt", cfg_.prompt}, {"prompt_tokens", prompt_tokens_}, {"tokens", tokens_}, {"text", text_}};
    write_file_atomic(cfg_.out + "/tokens.json", tj.dump(2, ' ', false, replace) + "\n");
    write_file_atomic(cfg_.out + "/response.txt", text_);
  } else if (logits_fd_ >= 0) {
    ::close(logits_fd_);
    logits_fd_ = -1;
    ::unlink(logits_tmp_.c_str());
  }
  write_run_dir(cfg_.out, trace_.serialize(m_.chunk_size, m_.chunks), record(ok, error));
}

void Run::fail_now(const std::string& error) {
  // Threads are blocked in faults the pager cannot serve, or the generation stopped moving:
  // write the evidence and leave without joining them (never a hang).
  io_end_.store(proc_read_bytes().value_or(io0_.load()));
  try {
    write_outputs(false, error, false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "residctl: run failed: %s (and the run directory could not be written: %s)\n",
                 one_line(error).c_str(), e.what());
    std::fflush(nullptr);
    std::_Exit(1);
  }
  std::fprintf(stderr, "residctl: run failed: %s\n", one_line(error).c_str());
  std::fflush(nullptr);
  std::_Exit(1);
}

void Run::drive() {
  llama_model* model = nullptr;
  llama_context* ctx = nullptr;
  ggml_threadpool* tp = nullptr;
  auto teardown = [&] {
    if (ctx) llama_free(ctx);
    ctx = nullptr;
    if (pager_) pager_->shutdown();
    model_mapping::teardown();
    if (model) llama_model_free(model);
    model = nullptr;
    model_mapping::disarm();
    if (tp) ggml_threadpool_free(tp);
    tp = nullptr;
  };
  try {
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mode = LLAMA_LOAD_MODE_MMAP;
    mp.lazy_mode = LLAMA_LAZY_MODE_OFF;
    mp.use_extra_bufts = false;  // no repacking: every arm runs the same kernels on the same bytes
    mp.check_tensors = false;    // would read every weight at load
    t_start_.store(now_ns());
    touch_progress();
    const uint64_t t_load = now_ns();
    model = llama_model_load_from_file(cfg_.model.c_str(), mp);
    load_ns_ = now_ns() - t_load;
    touch_progress();
    const MappingReport mr = model_mapping::report();
    if (!model) {
      if (pager_ && !mr.refused.empty())
        run_error_ = "mapping: llama.cpp's mapping of the model file was refused: " + mr.refused;
      else
        input_error_ = "llama.cpp could not load " + cfg_.model + (g_log.error().empty() ? "" : ": " + g_log.error());
      teardown();
      return;
    }
    if (pager_ && !mr.interposed) {
      run_error_ = "mapping: llama.cpp did not map the model file through the pager (mmap calls for the file: " +
                   std::to_string(mr.mmap_calls) + ")";
      teardown();
      return;
    }
    if (!pager_ && mr.addr == 0) {
      run_error_ = "mapping: llama.cpp did not map the model file (mmap calls for the file: " +
                   std::to_string(mr.mmap_calls) + ")";
      teardown();
      return;
    }
    observer_.set_mapping(mr.addr, pager_ ? m_.file_bytes : mr.length);
    if (!pager_) {
      kmap_base_ = reinterpret_cast<const std::byte*>(mr.addr);
      compute_chunk_runs(mr);
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    n_vocab_ = llama_vocab_n_tokens(vocab);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cfg_.ctx;
    cp.n_batch = cfg_.ctx;
    cp.n_ubatch = std::min<uint32_t>(cfg_.ctx, 512);
    cp.n_seq_max = 1;
    cp.n_threads = static_cast<int32_t>(cfg_.threads);
    cp.n_threads_batch = static_cast<int32_t>(cfg_.threads);
    cp.cb_eval = &EvalObserver::callback;
    cp.cb_eval_user_data = &observer_;
    cp.no_perf = true;
    const uint64_t t_ctx = now_ns();
    ctx = llama_init_from_model(model, cp);
    if (!ctx) {
      input_error_ = "llama.cpp could not create a context (ctx " + std::to_string(cfg_.ctx) + ")" +
                     (g_log.error().empty() ? "" : ": " + g_log.error());
      teardown();
      return;
    }
    // One persistent thread pool for every graph evaluation: the eval callback splits a pass
    // into one evaluation per object, and a pool made per evaluation would dominate.
    ggml_threadpool_params tpp = ggml_threadpool_params_default(static_cast<int>(cfg_.threads));
    tp = ggml_threadpool_new(&tpp);
    if (!tp) throw RunError("cannot create the ggml thread pool");
    llama_attach_threadpool(ctx, tp, tp);
    context_ns_ = now_ns() - t_ctx;
    touch_progress();

    // Tokenize the prompt with the model's tokenizer; BOS as the model says.
    {
      std::vector<llama_token> buf(cfg_.prompt.size() + 8);
      int n = llama_tokenize(vocab, cfg_.prompt.data(), static_cast<int32_t>(cfg_.prompt.size()), buf.data(),
                             static_cast<int32_t>(buf.size()), true, false);
      if (n < 0) {
        buf.resize(static_cast<size_t>(-n));
        n = llama_tokenize(vocab, cfg_.prompt.data(), static_cast<int32_t>(cfg_.prompt.size()), buf.data(),
                           static_cast<int32_t>(buf.size()), true, false);
      }
      if (n <= 0) {
        input_error_ = "the prompt tokenizes to no tokens";
        teardown();
        return;
      }
      buf.resize(static_cast<size_t>(n));
      prompt_tokens_ = std::move(buf);
    }
    if (prompt_tokens_.size() + cfg_.tokens > cfg_.ctx) {
      input_error_ = "the prompt (" + std::to_string(prompt_tokens_.size()) + " tokens) plus --tokens " +
                     std::to_string(cfg_.tokens) + " does not fit --ctx " + std::to_string(cfg_.ctx);
      teardown();
      return;
    }
    loaded_ = true;
    try {
      make_dirs(cfg_.out);
    } catch (const RunError& e) {
      input_error_ = std::string("--out: ") + e.what();
      teardown();
      return;
    }

    if (!cfg_.calibrate) {
      logits_tmp_ = cfg_.out + "/logits.f32.tmp";
      logits_fd_ = ::open(logits_tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (logits_fd_ < 0) throw RunError("cannot create " + logits_tmp_ + ": " + errno_name(errno));
      in_generation_.store(true);
      const size_t row_bytes = static_cast<size_t>(n_vocab_) * sizeof(float);
      auto argmax = [&](const float* row) {
        int32_t best = 0;
        for (int32_t i = 1; i < n_vocab_; ++i)
          if (row[i] > row[best]) best = i;
        return best;
      };
      auto take_row = [&](uint32_t i, const float* row) {
        // Outside the timed part: the row goes to the file (written back and dropped from the
        // page cache as we go, so it does not grow the process's memory) and is hashed.
        const off_t off = static_cast<off_t>(i) * static_cast<off_t>(row_bytes);
        size_t done = 0;
        while (done < row_bytes) {
          const ssize_t w = ::pwrite(logits_fd_, reinterpret_cast<const char*>(row) + done, row_bytes - done,
                                     off + static_cast<off_t>(done));
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) throw RunError("cannot write " + logits_tmp_ + ": " + errno_name(errno));
          done += static_cast<size_t>(w);
        }
        ::sync_file_range(logits_fd_, off, static_cast<off_t>(row_bytes), SYNC_FILE_RANGE_WRITE);
        if (i >= 2) {
          const off_t old = static_cast<off_t>(i - 2) * static_cast<off_t>(row_bytes);
          ::sync_file_range(logits_fd_, old, static_cast<off_t>(row_bytes),
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
          ::posix_fadvise(logits_fd_, old, static_cast<off_t>(row_bytes), POSIX_FADV_DONTNEED);
        }
        row_sha_.push_back(sha256_hex(row, row_bytes));
      };
      auto stop_reason = [&]() -> std::string {
        if (pager_ && pager_->failed()) return "pager: " + pager_->error();
        if (audit_error_) return *audit_error_;
        return {};
      };

      // Prefill: the prompt in one batch; the last row chooses token 0.
      llama_batch batch = llama_batch_init(static_cast<int32_t>(prompt_tokens_.size()), 0, 1);
      for (size_t i = 0; i < prompt_tokens_.size(); ++i) {
        batch.token[i] = prompt_tokens_[i];
        batch.pos[i] = static_cast<llama_pos>(i);
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i + 1 == prompt_tokens_.size();
      }
      batch.n_tokens = static_cast<int32_t>(prompt_tokens_.size());
      // F reads nothing ahead for a pass that will not run.
      if (pager_ && cfg_.tokens == 1) pager_->set_readahead_horizon((pass_ + 1) * S_ - 1);
      const uint64_t t_pre = now_ns();
      int rc = llama_decode(ctx, batch);
      finish_pass();
      llama_batch_free(batch);
      if (rc != 0) throw RunError("llama_decode of the prompt failed (status " + std::to_string(rc) + ")");
      const float* row = llama_get_logits_ith(ctx, -1);
      if (!row) throw RunError("llama.cpp returned no logits for the prompt");
      llama_token tok = argmax(row);
      prefill_ns_ = now_ns() - t_pre;
      tokens_.push_back(tok);
      take_row(0, row);
      progress_line(1, cfg_.tokens == 1);

      const uint64_t t_dec = now_ns();
      for (uint32_t i = 1; i < cfg_.tokens; ++i) {
        if (auto why = stop_reason(); !why.empty()) {
          run_error_ = why;
          break;
        }
        llama_token in = tok;
        llama_batch one = llama_batch_get_one(&in, 1);
        if (pager_ && i + 1 == cfg_.tokens) pager_->set_readahead_horizon((pass_ + 1) * S_ - 1);
        const uint64_t t1 = now_ns();
        rc = llama_decode(ctx, one);
        finish_pass();
        if (rc != 0) throw RunError("llama_decode failed at token " + std::to_string(i) + " (status " + std::to_string(rc) + ")");
        row = llama_get_logits_ith(ctx, -1);
        if (!row) throw RunError("llama.cpp returned no logits at token " + std::to_string(i));
        tok = argmax(row);
        decode_ns_ += now_ns() - t1;
        tokens_.push_back(tok);
        take_row(i, row);
        progress_line(i + 1, i + 1 == cfg_.tokens);
      }
      decode_wall_ns_ = now_ns() - t_dec;
      t_end_.store(now_ns());
      if (pager_) region_huge_bytes_ = pager_->region_huge_bytes();
      io_end_.store(proc_read_bytes().value_or(io0_.load()));
      if (tokens_.size() < cfg_.tokens && ::isatty(2)) std::fputc('\n', stderr);
      in_generation_.store(false);
      if (run_error_.empty()) {
        if (auto why = stop_reason(); !why.empty()) run_error_ = why;
      }
      if (run_error_.empty() && pass_ < kAuditPasses) {
        if (auto e = startup_audit_error(audit_, m_, static_cast<uint32_t>(pass_))) run_error_ = *e;
      }
      // The generated text.
      std::vector<char> tb(tokens_.size() * 16 + 64);
      int n = llama_detokenize(vocab, tokens_.data(), static_cast<int32_t>(tokens_.size()), tb.data(),
                               static_cast<int32_t>(tb.size()), false, false);
      if (n < 0) {
        tb.resize(static_cast<size_t>(-n));
        n = llama_detokenize(vocab, tokens_.data(), static_cast<int32_t>(tokens_.size()), tb.data(),
                             static_cast<int32_t>(tb.size()), false, false);
      }
      text_.assign(tb.data(), static_cast<size_t>(std::max(n, 0)));
    } else {
      t_end_.store(now_ns());
      io_end_.store(proc_read_bytes().value_or(io0_.load()));
    }
    teardown();
  } catch (const std::exception& e) {
    if (run_error_.empty()) run_error_ = e.what();
    in_generation_.store(false);
    try {
      teardown();
    } catch (...) {
    }
  }
}

int Run::execute() {
  // ---- the budget (before anything is written) -----------------------------------------
  policy_kind_ = policy_of(cfg_.arm);
  {
    struct stat st{};
    if (::stat(cfg_.model.c_str(), &st) != 0) throw InputError("model file " + cfg_.model + " cannot be opened");
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  if (policy_kind_) {
    if (!cfg_.budget_bytes) throw InputError("--budget-bytes is required for arm " + std::string(to_string(cfg_.arm)));
    FaultySourceHandle fs = with_fault(open_source(cfg_.source, cfg_.model, cfg_.chunk_size,
                                                   source_options(cfg_.source, cfg_.windows, cfg_.depth)),
                                       cfg_.fault);
    auto source = std::move(fs.source);
    fault_report_ = std::move(fs.report);
    // Every window is paid from the budget (F: all N of them), as is the page-table reserve.
    window_bytes_ = source->window_bytes();
    page_table_bytes_ = Pager::page_table_reserve(static_cast<uint64_t>(m_.chunks) * cfg_.chunk_size);
    const uint64_t own = window_bytes_ + page_table_bytes_;
    // A step that fits (at most fit_chunks_ chunks) holds every chunk with a live consumer
    // for the whole step; a larger one runs oversize: the pager pins, per compute thread,
    // the last two chunks it faulted on and evicts the rest of the step by the policy's
    // rule (pager.hpp has the progress argument). The hard minimum: the pins of every
    // compute thread, one chunk to fill, one of slack (the victim then never has to be a
    // chunk a thread just walked off, whose tail a slower thread may still be reading),
    // plus arm E's prefetch horizon; `collapse` also reserves the chunk MADV_COLLAPSE's
    // transient huge page occupies.
    const uint64_t depth = cfg_.arm == Arm::PagerPrefetch ? cfg_.prefetch_depth : 0;
    huge_reserve_ = huge_mode(cfg_) == HugeChunks::Collapse ? 1 : 0;
    min_chunks_ = static_cast<uint64_t>(Pager::kPinsPerThread) * cfg_.threads + 2 + depth;
    const uint64_t min_bytes = (min_chunks_ + huge_reserve_) * cfg_.chunk_size + own;
    if (*cfg_.budget_bytes < own)
      throw InputError("--budget-bytes " + std::to_string(*cfg_.budget_bytes) +
                       " does not even cover the pager's window and page tables (" + std::to_string(own) +
                       " bytes); the smallest accepted is " + std::to_string(min_bytes));
    const uint64_t whole = (*cfg_.budget_bytes - own) / cfg_.chunk_size;
    budget_chunks_ = whole >= huge_reserve_ ? whole - huge_reserve_ : 0;
    if (*budget_chunks_ < min_chunks_)
      throw InputError("--budget-bytes " + std::to_string(*cfg_.budget_bytes) + " leaves " +
                       std::to_string(*budget_chunks_) + " chunk(s) after the pager's own " + std::to_string(own) +
                       " bytes" + (huge_reserve_ ? " and the collapse reserve" : "") + "; " + to_string(cfg_.arm) +
                       " needs at least " + std::to_string(min_chunks_) + " (" + std::to_string(Pager::kPinsPerThread) +
                       " x " + std::to_string(cfg_.threads) + " compute thread(s) + 2" + (depth ? " + " + std::to_string(depth) + " prefetch depth" : "") +
                       ") (--budget-bytes >= " + std::to_string(min_bytes) + ")");
    fit_chunks_ = *budget_chunks_ - depth;
    PagerConfig pc;
    pc.chunk_size = cfg_.chunk_size;
    pc.budget_chunks = *budget_chunks_;
    pc.prefetch_depth = cfg_.arm == Arm::PagerPrefetch && !cfg_.calibrate ? cfg_.prefetch_depth : 0;
    pc.eager_reconcile = cfg_.eager_reconcile;
    pc.watchdog_s = cfg_.watchdog_s;
    pc.step_chunks = steps_;
    pc.max_pins = cfg_.threads;
    pc.huge = huge_mode(cfg_);
    // F: the next object's chunks are read ahead while the current one computes. Not the
    // embd object's: its step reads the rows of a token not chosen yet (the previous pass's
    // output picks it), so its declared chunks (the whole embedding) are not what it reads.
    pc.readahead = cfg_.source == SourceEngine::Uring && !cfg_.calibrate;
    if (pc.readahead) {
      // Nor an oversize object's: it cannot be held whole, so it is read as its threads go.
      pc.readahead_steps = steps_;
      pc.readahead_steps[0].clear();
      for (auto& st : pc.readahead_steps)
        if (st.size() > fit_chunks_) st.clear();
    }
    // The policy's declared pass: the embd step declares none of the embedding, since it
    // reads only the rows of a token the previous pass has not chosen yet when the victims
    // for it are picked; declaring the whole matrix there made D hold the embedding (used
    // whole only by a tied output) at the expense of the layers (D/OPT 1.05-1.07 at
    // r = 0.25..0.75 on SmolLM2). Its rows are demand-filled as they are read.
    auto declared = steps_;
    declared[0].clear();
    pager_ = std::make_unique<Pager>(std::move(source), make_sequence_policy(*policy_kind_, m_.chunks, declared),
                                     pc, &trace_);
  } else if (cfg_.budget_bytes) {
    budget_chunks_ = *cfg_.budget_bytes / cfg_.chunk_size;
  }

  // Start cold: drop the model file's clean page-cache pages (our header read included).
  if (int fd = ::open(cfg_.model.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  io0_.store(proc_read_bytes().value_or(0));
  io_end_.store(io0_.load());
  if (pager_) {
    pager_->set_failure_callback([this] {
      std::lock_guard lk(done_mu_);
      pager_failed_ = true;
      done_cv_.notify_all();
    });
    pager_->set_step(0);
    pager_->start();
    model_mapping::substitute(dev_, ino_, const_cast<std::byte*>(pager_->base()), m_.file_bytes,
                              (m_.file_bytes + kPage - 1) / kPage * kPage);
  } else {
    model_mapping::observe(dev_, ino_);
  }

  // ---- the driver thread and its monitor --------------------------------------------
  touch_progress();
  std::thread driver([this] {
    drive();
    std::lock_guard lk(done_mu_);
    driver_done_ = true;
    done_cv_.notify_all();
  });
  {
    std::unique_lock lk(done_mu_);
    const uint64_t limit = static_cast<uint64_t>(cfg_.watchdog_s * 1e9);
    while (!done_cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return driver_done_ || pager_failed_; })) {
      lk.unlock();
      if (pager_) pager_->check_stall();
      const uint64_t idle = now_ns() - last_progress_ns_.load(std::memory_order_relaxed);
      if (in_generation_.load() && idle > limit && !(pager_ && pager_->failed())) {
        const PagerStats ps = pager_ ? pager_->stats() : PagerStats{};
        fail_now("watchdog: no consumption signal for " + std::to_string(cfg_.watchdog_s) + " s at pass " +
                 std::to_string(passes_done_.load()) + " after " + std::to_string(steps_done_.load()) +
                 " object steps (faults handled " + std::to_string(ps.faults_handled) + ", demand fills " +
                 std::to_string(ps.demand_fills) + ", evictions " + std::to_string(ps.evictions) +
                 "): the generation stopped making progress");
      }
      lk.lock();
    }
    if (pager_failed_ && !driver_done_) {
      lk.unlock();
      // The driver may be blocked in a fault the pager cannot serve: give it a moment to
      // notice between passes, then leave with the evidence.
      const uint64_t t = now_ns();
      lk.lock();
      while (!driver_done_ && now_ns() - t < 2'000'000'000ull) done_cv_.wait_for(lk, std::chrono::milliseconds(50));
      if (!driver_done_) {
        lk.unlock();
        fail_now("pager: " + pager_->error());
      }
    }
  }
  driver.join();

  if (!input_error_.empty()) throw InputError(input_error_);
  if (!loaded_) {
    // Failed before the run directory existed (a refused mapping): make it for the evidence.
    make_dirs(cfg_.out);
  }

  // ---- verdict -------------------------------------------------------------------------
  std::string error = run_error_;
  const auto& os = observer_.stats();
  const bool generated = !cfg_.calibrate;
  if (error.empty() && pager_ && pager_->failed()) error = "pager: " + pager_->error();
  if (error.empty() && generated && (os.foreign_reads > 0 || os.outside_reads > 0))
    error = "consumption signal: " + std::to_string(os.foreign_reads) + " weight read(s) outside the current object, " +
            std::to_string(os.outside_reads) + " outside the model mapping; first: " + os.first_violation;
  if (error.empty() && generated && (sequence_errors_ > 0 || audit_.out_of_order() > 0))
    error = "signal audit: " + std::to_string(sequence_errors_) + " object step(s) out of the declared order, " +
            std::to_string(audit_.out_of_order()) + " consumption signal(s) out of step order";
  if (error.empty() && pager_ && pager_->stats().reconcile_mismatches > 0)
    error = "reconcile: " + std::to_string(pager_->stats().reconcile_mismatches) +
            " mismatch(es) between the pager's books and mincore or the Plan; first: " + pager_->first_mismatch();
  if (error.empty() && pager_) error = pager_close_error(*pager_);
  if (error.empty() && cfg_.fault.cell == FaultCell::RecycleLive && generated) {
    if (!probe_.fired)
      error = "negative control: the recycle probe of pass " + std::to_string(cfg_.fault.at) + " did not fire";
    else if (probe_.answer != PlanError::ConsumersLive || !probe_.resident_after)
      error = "negative control: the Plan answered " +
              std::string(probe_.answer == PlanError::None ? "recycled" : to_string(probe_.answer)) +
              " to recycling chunk " + std::to_string(probe_.chunk) + ", which had a live consumer";
  }
  if (error.empty() && fault_report_ && generated) {
    // A fatal cell or a stall must fail the run; a recoverable one must fire and recover; a
    // cell that never fired is no evidence either way.
    const std::string cell = to_string(cfg_.fault.cell);
    if (!fault_report_->fired)
      error = "fault " + cell + " did not fire (no eligible point at or after " + std::to_string(cfg_.fault.at) + ")";
    else if (cfg_.fault.cell != FaultCell::OutOfOrder)
      error = "fault " + cell + " fired but the run did not fail";
  }
  const bool ok = error.empty();
  write_outputs(ok, error, generated && ok);
  if (!ok) {
    std::fprintf(stderr, "residctl: run failed: %s\n", one_line(error).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int run_generate(const GenerateConfig& cfg) {
  // ---- flags -------------------------------------------------------------------------
  if (cfg.chunk_size == 0 || cfg.chunk_size % kPage != 0)
    throw InputError("--chunk-size " + std::to_string(cfg.chunk_size) + " is not a positive multiple of 4096");
  if (cfg.tokens == 0) throw InputError("--tokens must be at least 1");
  if (cfg.threads == 0 || cfg.threads > 512) throw InputError("--threads must be in 1..512");
  if (cfg.ctx < 8) throw InputError("--ctx must be at least 8");
  if (cfg.prompt.empty()) throw InputError("--prompt must not be empty");
  if (!(cfg.watchdog_s > 0)) throw InputError("--watchdog-s must be positive");
  if (cfg.arm == Arm::PagerPrefetch && cfg.prefetch_depth == 0)
    throw InputError("--prefetch-depth must be at least 1 for pager-prefetch");
  if (cfg.tokens >= cfg.ctx) throw InputError("--tokens must be smaller than --ctx");
  check_source_flags(cfg.source, cfg.windows, cfg.depth);
  check_pager_fault(cfg.fault, cfg.arm, cfg.source, "generate");

  llama_log_set(&LogCapture::cb, &g_log);
  ggml_log_set(&LogCapture::cb, &g_log);
  // ---- the model's objects (header and tensor table only) ------------------------------
  GgufSummary g = read_gguf(cfg.model);
  Manifest m = build_manifest(g.tensors, g.file_bytes, g.data_offset, cfg.chunk_size);
  if (static_cast<uint64_t>(cfg.tokens + 2) * m.steps_per_pass() > UINT32_MAX)
    throw InputError("--tokens times the object steps per pass exceeds the trace's u32 step field");

  llama_backend_init();
  int rc;
  {
    Run run(cfg, std::move(m), std::move(g));
    rc = run.execute();
  }
  llama_backend_free();
  return rc;
}

}  // namespace resid

#endif  // RESID_WITH_LLAMA
