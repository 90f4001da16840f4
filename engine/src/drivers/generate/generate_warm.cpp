// --warm-request (C12, reference 004 Appendix A.3): after the primary request, one process
// resets (llama.cpp's memory and KV cache cleared, the Plan's epoch advanced), serves the
// same prompt and --tokens again with the pager's resident chunks kept (the warm request),
// and resets again before the shutdown. The run directory's generation is the primary's;
// run.json `requests` compares the two.
#include "core/proc_io.hpp"
#include "core/sha256.hpp"
#include "drivers/generate/generate_run.hpp"

namespace resid {

void GenerateRun::reset_request(llama_context* ctx) {
  llama_memory_clear(llama_get_memory(ctx), true);
  const PlanResult<uint32_t> r = pager_->reset();
  if (!r.ok() && run_error_.empty()) run_error_ = std::string("warm request: the Plan refused the reset (") + to_string(r.error) + ")";
}

void GenerateRun::serve_warm_request(llama_context* ctx, const llama_vocab* vocab) {
  reset_request(ctx);
  if (!run_error_.empty()) return;
  // The primary's tokens, rows and timings are the run's; the warm request's are kept apart.
  std::vector<llama_token> tokens = std::move(tokens_);
  std::vector<std::string> rows = std::move(row_sha_);
  const uint64_t prefill = prefill_ns_, decode = decode_ns_, wall = decode_wall_ns_;
  const LatencyHistogram token_hist = token_hist_;
  tokens_.clear();
  row_sha_.clear();
  decode_ns_ = 0;
  write_logits_ = false;
  const uint64_t misses0 = misses_.load(), io0 = proc_read_bytes().value_or(0);
  pager_->set_readahead_horizon(UINT64_MAX);  // the primary's last pass set it
  generate_tokens(ctx, vocab);
  requests_.push_back(request_log("warm", vocab, misses0, io0));
  tokens_ = std::move(tokens);
  row_sha_ = std::move(rows);
  prefill_ns_ = prefill;
  decode_ns_ = decode;
  decode_wall_ns_ = wall;
  token_hist_ = token_hist;
  if (run_error_.empty()) reset_request(ctx);
}

// tokens_sha256: the sha256 of exactly the bytes tokens.json would hold for the request's
// tokens (tokens_file: prompt, prompt tokens, tokens, text); logits_sha256: the sha256 of
// exactly the bytes logits.sha256 would hold for its rows (logits_sums: "i <row sha256>\n"
// per row). The primary's therefore equal sha256(tokens.json) and sha256(logits.sha256).
GenerateRun::RequestLog GenerateRun::request_log(const char* kind, const llama_vocab* vocab, uint64_t misses0,
                                                 uint64_t io0) const {
  RequestLog r;
  r.kind = kind;
  r.tokens = tokens_;
  const std::string tf = tokens_file(tokens_, detokenize(vocab, tokens_));
  const std::string sums = logits_sums(row_sha_);
  r.tokens_sha256 = sha256_hex(tf.data(), tf.size());
  r.logits_sha256 = sha256_hex(sums.data(), sums.size());
  r.misses = misses_.load() - misses0;
  r.physical_bytes_read = proc_read_bytes().value_or(io0) - io0;
  return r;
}

nlohmann::json GenerateRun::requests_json() const {
  if (!cfg_.warm_request) return nullptr;
  nlohmann::json a = nlohmann::json::array();
  for (const RequestLog& r : requests_)
    a.push_back({{"kind", r.kind},
                 {"tokens", r.tokens},
                 {"tokens_sha256", r.tokens_sha256},
                 {"logits_sha256", r.logits_sha256},
                 {"misses", r.misses},
                 {"physical_bytes_read", r.physical_bytes_read}});
  return a;
}

}  // namespace resid
