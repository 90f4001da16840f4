// `generate`'s run directory (docs/run-contract.md): objects.json, routes.jsonl, the
// generation (logits.f32, logits.sha256, tokens.json, response.txt) of a run that succeeded,
// trace.bin, and run.json last.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/fsutil.hpp"
#include "core/proc_io.hpp"
#include "core/run_record.hpp"
#include "drivers/generate/generate_run.hpp"
#include "drivers/common/record.hpp"

#ifndef RESID_LLAMA_COMMIT
#define RESID_LLAMA_COMMIT "unknown"
#endif

namespace resid {

nlohmann::json GenerateRun::counters_json() {
  const AccessCounts ac{steps_done_.load(), accesses_.load(), misses_.load(), signals_.load(),
                        io_end_.load() - io0_.load()};
  nlohmann::json j = pager_counters_json(ac, pager_.get());
  // Demand fills outside the step they were attributed to (a weight touched out of its
  // declared object): evidence on the signal's exactness, from the trace. And demand fills
  // of a chunk the step has no access record of (a MoE step that read an expert the routes
  // did not pick): evidence that the reference trace holds every chunk really read.
  uint64_t stray = 0, unrecorded = 0;
  const auto recs = trace_.sorted();
  std::set<std::pair<uint64_t, ChunkId>> accessed;
  for (const auto& r : recs)
    if (r.kind == static_cast<uint8_t>(TraceKind::Access)) accessed.emplace(r.step, r.chunk);
  for (const auto& r : recs) {
    if (r.kind != static_cast<uint8_t>(TraceKind::DemandFill)) continue;
    const auto& cs = steps_[r.step % S_];
    if (!std::binary_search(cs.begin(), cs.end(), r.chunk))
      ++stray;
    else if (!accessed.count({r.step, r.chunk}))
      ++unrecorded;
  }
  j["stray_demand_fills"] = stray;
  j["unrecorded_demand_fills"] = unrecorded;
  return j;
}

nlohmann::json GenerateRun::model_json() const {
  uint64_t tensor_bytes = 0;
  for (const auto& t : m_.tensors) tensor_bytes += t.bytes;
  return {{"path", cfg_.model},
          {"bytes", m_.file_bytes},
          {"architecture", g_.architecture},
          {"tensor_bytes", tensor_bytes},
          {"data_offset", m_.data_offset},
          {"n_layer", m_.n_layer},
          {"n_vocab", n_vocab_},
          {"n_expert", g_.n_expert},
          {"n_expert_used", g_.n_expert_used},
          {"tied_output", m_.tied_output}};
}

nlohmann::json GenerateRun::generation_json() const {
  const uint64_t decode_passes = tokens_.size() > 1 ? tokens_.size() - 1 : 0;
  return {{"prompt_tokens", prompt_tokens_.size()},
          {"tokens", tokens_.size()},
          {"passes", passes_done_.load()},
          {"decode_passes", decode_passes},
          {"load_ns", load_ns_},
          {"context_ns", context_ns_},
          {"prefill_ns", prefill_ns_},
          {"decode_ns", decode_ns_},
          {"decode_wall_ns", decode_wall_ns_},
          // A token's latency, beside the pager's per-fault latencies (latency_ns).
          {"token_latency_ns",
           {{"count", token_hist_.count()}, {"p50", token_hist_.quantile(0.5)}, {"p99", token_hist_.quantile(0.99)},
            {"max", token_hist_.max()}}},
          {"tokens_per_s",
           decode_ns_ ? static_cast<double>(decode_passes) * 1e9 / static_cast<double>(decode_ns_) : 0.0}};
}

nlohmann::json GenerateRun::signal_audit_json() const {
  const auto& os = observer_.stats();
  return {{"signals", audit_.signals()},
          {"out_of_order", audit_.out_of_order()},
          {"sequence_errors", sequence_errors_},
          {"zero_signal_chunks", audit_.zero_signal_chunks()},
          {"passes_checked", std::min<uint64_t>(passes_done_.load(), kAuditPasses)},
          {"nodes", os.nodes},
          {"boundaries", os.boundaries},
          {"weight_reads", os.weight_reads},
          {"foreign_reads", os.foreign_reads},
          {"outside_reads", os.outside_reads},
          {"embd_rows_read", os.embd_rows_read},
          {"embd_rows_unread", os.embd_rows_unread},
          {"moe_steps_routed", moe_steps_routed_},
          {"moe_steps_unrouted", moe_steps_unrouted_},
          {"route_node", observer_.route_node()},
          {"route_events", os.route_events},
          {"route_violations", os.route_violations},
          {"first_route_violation", or_null(os.first_route_violation)},
          {"consumption", to_string(cfg_.consumption)},
          {"releases", os.releases},
          {"tensors_released", os.tensors_released},
          {"chunks_let_go_early", early_leaves_},
          {"reads_after_release", os.reads_after_release},
          {"discovery_passes", os.discovery_passes},
          {"objects_out_of_order", os.out_of_order},
          {"first_violation", or_null(os.first_violation)}};
}

nlohmann::json GenerateRun::record(const std::string& error) {
  Pager* p = pager_.get();
  nlohmann::json j = pager_run_head("generate", error, a_, p);
  j["signal"] = "eval-callback";
  j["config"] = pager_config_json(a_);
  j["config"].update({{"model", cfg_.model}, {"prompt", cfg_.prompt}, {"tokens", cfg_.tokens}, {"ctx", cfg_.ctx},
                      {"huge_chunks", cfg_.huge ? to_string(*cfg_.huge) : "default"},
                      {"graph_plan", or_null(cfg_.graph_plan)}});
  j["region"] = {{"path", cfg_.model}, {"bytes", m_.file_bytes}, {"chunk_size", m_.chunk_size}, {"chunks", m_.chunks}};
  j["budget"] = pager_budget_json(a_, budget_, budget_chunks_);
  j["budget"].update({{"fit_chunks", p ? nlohmann::json(fit_chunks_) : nlohmann::json(nullptr)},
                      {"oversize_objects", oversize_objects()}});
  j["counters"] = counters_json();
  const PagerStats ps = p ? p->stats() : PagerStats{};
  j["huge_chunks"] = {{"mode", p ? nlohmann::json(to_string(huge_mode(cfg_))) : nlohmann::json(nullptr)},
                      {"move_fills", ps.move_fills},
                      {"move_fallbacks", ps.move_fallbacks},
                      {"move_busy_fallbacks", ps.move_busy_fallbacks},
                      {"move_first_errno", ps.move_first_errno ? nlohmann::json(errno_name(ps.move_first_errno)) : nlohmann::json(nullptr)},
                      {"move_recycles", ps.move_recycles},
                      {"recycle_misses", ps.recycle_misses},
                      {"recycle_first_errno", ps.recycle_first_errno ? nlohmann::json(errno_name(ps.recycle_first_errno)) : nlohmann::json(nullptr)},
                      {"collapses", ps.collapses},
                      {"collapse_failures", ps.collapse_failures},
                      {"collapse_first_errno", ps.collapse_first_errno ? nlohmann::json(errno_name(ps.collapse_first_errno)) : nlohmann::json(nullptr)},
                      {"region_huge_bytes_at_end", region_huge_bytes_ ? nlohmann::json(*region_huge_bytes_) : nlohmann::json(nullptr)}};
  j["latency_ns"] = pager_latency_json(p);
  add_pager_sections(j, p, a_, fault_report_.get());
  const bool probe = a_.fault.cell == FaultCell::RecycleLive;
  if (probe) j["fault"]["fired"] = probe_.fired;
  if (j["fault"].is_object()) add_driver_cell_json(j["fault"]);
  j["requests"] = requests_json();
  j["recycle_probe"] = !probe ? nlohmann::json(nullptr)
                              : nlohmann::json{{"pass", a_.fault.at},
                                               {"fired", probe_.fired},
                                               {"chunk", probe_.fired ? nlohmann::json(probe_.chunk) : nlohmann::json(nullptr)},
                                               {"answer", !probe_.fired ? nlohmann::json(nullptr)
                                                          : nlohmann::json(probe_.answer == PlanError::None ? "recycled" : to_string(probe_.answer))},
                                               {"resident_after", probe_.resident_after}};
  // Load, context and generation (teardown and writing the run directory excluded).
  const uint64_t t0 = t_start_.load(), t1 = t_end_.load();
  j["wall_ns"] = t0 ? (t1 ? t1 : now_ns()) - t0 : 0;
  j["trace"] = {{"file", "trace.bin"}, {"records", trace_.size()}};
  j["model"] = model_json();
  j["llama"] = {{"commit", RESID_LLAMA_COMMIT}, {"repack_disabled", !cfg_.repack}, {"use_extra_bufts", cfg_.repack},
                {"load_mode", "mmap"},         {"lazy_mode", "off"},          {"threadpool", "persistent"},
                {"threads", a_.threads},       {"ctx", cfg_.ctx}};
  j["generation"] = generation_json();
  j["speculative"] = speculative_json();
  j["objects"] = m_.objects.size();
  j["steps_per_pass"] = S_;
  j["max_step_chunks"] = m_.max_step_chunks();
  j["mapping"] = model_mapping::to_json(model_mapping::report());
  j["signal_audit"] = signal_audit_json();
  j["identity"] = identity_json();
  j["consumer"] = consumer_json();
  j["destination"] = destination_json();
  j["demand"] = {{"file", "demand.json"}};
  return j;
}

// A successful run's generation: the logit rows (renamed into place), their sha256 per row,
// the tokens and the response text.
void GenerateRun::write_generation() {
  if (logits_fd_ >= 0) {
    if (::fsync(logits_fd_) != 0 || ::close(logits_fd_) != 0)
      throw RunError("cannot flush " + logits_tmp_ + ": " + errno_name(errno));
    logits_fd_ = -1;
    if (::rename(logits_tmp_.c_str(), (a_.out + "/logits.f32").c_str()) != 0)
      throw RunError("cannot rename " + logits_tmp_ + ": " + errno_name(errno));
  }
  write_file_atomic(a_.out + "/logits.sha256", logits_sums(row_sha_));
  write_file_atomic(a_.out + "/tokens.json", tokens_file(tokens_, text_));
  write_file_atomic(a_.out + "/response.txt", text_);
}

std::string GenerateRun::tokens_file(const std::vector<llama_token>& tokens, const std::string& text) const {
  nlohmann::json tj = {{"prompt", cfg_.prompt}, {"prompt_tokens", prompt_tokens_}, {"tokens", tokens}, {"text", text}};
  return tj.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string GenerateRun::logits_sums(const std::vector<std::string>& row_sha) {
  std::string sums;
  for (size_t i = 0; i < row_sha.size(); ++i) sums += std::to_string(i) + " " + row_sha[i] + "\n";
  return sums;
}

// A write that fails (a full disk) throws after dropping the partial logits, so the run
// directory holds no .tmp file; the engine's error names the file and the errno.
void GenerateRun::write_outputs(const std::string& error, bool with_generation) {
  try {
    write_outputs_or_throw(error, with_generation);
  } catch (...) {
    if (logits_fd_ >= 0) ::close(logits_fd_);
    logits_fd_ = -1;
    if (!logits_tmp_.empty()) ::unlink(logits_tmp_.c_str());
    throw;
  }
}

void GenerateRun::write_outputs_or_throw(const std::string& error, bool with_generation) {
  const auto replace = nlohmann::json::error_handler_t::replace;
  write_file_atomic(a_.out + "/objects.json", m_.to_json().dump(2, ' ', false, replace) + "\n");
  write_file_atomic(a_.out + "/demand.json", observer_.demand().to_json().dump(1, ' ', false, replace) + "\n");
  if (g_.n_expert > 0) {
    std::string lines;
    {
      std::lock_guard lk(routes_mu_);
      for (const auto& l : routes_) lines += l + '\n';
    }
    write_file_atomic(a_.out + "/routes.jsonl", lines);
  }
  if (with_generation) {
    write_generation();
  } else if (logits_fd_ >= 0) {
    ::close(logits_fd_);
    logits_fd_ = -1;
    ::unlink(logits_tmp_.c_str());
  }
  if (!cfg_.graph_plan_out.empty()) write_file_atomic(cfg_.graph_plan_out, observer_.plans_json().dump(1) + "\n");
  write_run_dir(a_.out, trace_.serialize(m_.chunk_size, m_.chunks), record(error));
}

void GenerateRun::fail_now(const std::string& error) {
  // Threads are blocked in faults the pager cannot serve, or the generation stopped moving:
  // write the evidence and leave without joining them (never a hang).
  io_end_.store(proc_read_bytes().value_or(io0_.load()));
  try {
    write_outputs(error, false);
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

}  // namespace resid
