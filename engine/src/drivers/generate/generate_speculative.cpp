// --draft (C4, reference 004 Appendix A.1): greedy speculative decoding. A draft model whose
// vocabulary is the target's proposes up to --draft-max tokens from the committed prefix;
// the target (its weights served by the pager, or the kernel's mapping for arm A) evaluates
// the last committed token and the proposal in one traversal, commits its own argmax at
// each position while it agrees with the proposal, and one more (the correction or, when
// all agree, the bonus). The committed tokens are therefore the target's greedy tokens; each
// committed output's logit row is the target's row at its position in that traversal.
//
// The draft is loaded read into memory (not mapped: the pager's interposition and the
// process's reads stay the target's); its load reads are counted apart.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/proc_io.hpp"
#include "drivers/generate/generate_run.hpp"

namespace resid {

namespace {

// "" when the two vocabularies are the same token for token (type, size, every token's text,
// BOS/EOS), else what differs: a draft proposes token ids the target must read as its own.
std::string vocab_mismatch(const llama_vocab* t, const llama_vocab* d) {
  if (llama_vocab_type(t) != llama_vocab_type(d)) return "the vocabulary types differ";
  const int32_t n = llama_vocab_n_tokens(t);
  if (n != llama_vocab_n_tokens(d))
    return "the vocabularies have " + std::to_string(n) + " and " + std::to_string(llama_vocab_n_tokens(d)) + " tokens";
  if (llama_vocab_bos(t) != llama_vocab_bos(d) || llama_vocab_eos(t) != llama_vocab_eos(d)) return "BOS or EOS differ";
  for (int32_t i = 0; i < n; ++i)
    if (std::strcmp(llama_vocab_get_text(t, i), llama_vocab_get_text(d, i)) != 0)
      return "token " + std::to_string(i) + " differs";
  return {};
}

// One batch of `tokens` at positions from `pos`, logits for the last only or for every one.
llama_batch make_batch(const llama_token* tokens, size_t n, size_t pos, bool all_logits) {
  llama_batch b = llama_batch_init(static_cast<int32_t>(n), 0, 1);
  for (size_t i = 0; i < n; ++i) {
    b.token[i] = tokens[i];
    b.pos[i] = static_cast<llama_pos>(pos + i);
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = all_logits || i + 1 == n;
  }
  b.n_tokens = static_cast<int32_t>(n);
  return b;
}

}  // namespace

bool GenerateRun::load_draft(const llama_vocab* target_vocab, ggml_threadpool* tp) {
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mode = LLAMA_LOAD_MODE_NONE;  // read into memory: no mapping, so none for the pager to see
  mp.use_extra_bufts = false;
  mp.check_tensors = false;
  const uint64_t io0 = proc_read_bytes().value_or(0), t0 = now_ns();
  clear_llama_log_error();
  spec_.model = llama_model_load_from_file(cfg_.draft.c_str(), mp);
  if (!spec_.model) {
    input_error_ = "--draft " + cfg_.draft + ": llama.cpp could not load it" +
                   (llama_log_error().empty() ? "" : ": " + llama_log_error());
    return false;
  }
  if (std::string why = vocab_mismatch(target_vocab, llama_model_get_vocab(spec_.model)); !why.empty()) {
    input_error_ = "--draft " + cfg_.draft + ": its tokenizer is not the target's (" + why + ")";
    return false;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cfg_.ctx;
  cp.n_batch = cfg_.ctx;
  cp.n_ubatch = std::min<uint32_t>(cfg_.ctx, 512);
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = static_cast<int32_t>(a_.threads);
  cp.no_perf = true;  // no eval callback: the draft's graph is not the target's steps
  spec_.ctx = llama_init_from_model(spec_.model, cp);
  if (!spec_.ctx) {
    input_error_ = "--draft " + cfg_.draft + ": llama.cpp could not create its context";
    return false;
  }
  llama_attach_threadpool(spec_.ctx, tp, tp);  // used one graph at a time, as the target's
  spec_.load_ns = now_ns() - t0;
  spec_.load_bytes_read = proc_read_bytes().value_or(io0) - io0;
  // The draft is in memory now: its file's page cache would only crowd the host limit.
  if (int fd = ::open(cfg_.draft.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  touch_progress();
  return true;
}

void GenerateRun::free_draft() {
  if (spec_.ctx) llama_free(spec_.ctx);
  if (spec_.model) llama_model_free(spec_.model);
  spec_.ctx = nullptr;
  spec_.model = nullptr;
}

// The draft's greedy proposal of `k` tokens after `hist` (prompt and committed tokens). Its
// KV cache keeps the prefix of `hist` it has seen (spec_.n_past); the rest is fed in one
// batch, then one token at a time.
std::vector<llama_token> GenerateRun::propose(const std::vector<llama_token>& hist, uint32_t k) {
  std::vector<llama_token> out;
  if (k == 0) return out;
  const uint64_t t0 = now_ns();
  llama_memory_seq_rm(llama_get_memory(spec_.ctx), 0, static_cast<llama_pos>(spec_.n_past), -1);
  llama_batch b = make_batch(hist.data() + spec_.n_past, hist.size() - spec_.n_past, spec_.n_past, false);
  int rc = llama_decode(spec_.ctx, b);
  llama_batch_free(b);
  if (rc != 0) throw RunError("the draft's llama_decode failed (status " + std::to_string(rc) + ")");
  spec_.n_past = hist.size();
  out.push_back(argmax(llama_get_logits_ith(spec_.ctx, -1)));
  while (out.size() < k) {
    llama_token in = out.back();
    rc = llama_decode(spec_.ctx, llama_batch_get_one(&in, 1));
    if (rc != 0) throw RunError("the draft's llama_decode failed (status " + std::to_string(rc) + ")");
    out.push_back(argmax(llama_get_logits_ith(spec_.ctx, -1)));
  }
  spec_.draft_ns += now_ns() - t0;
  return out;
}

// After the prefill (token 0 chosen): rounds of proposal and one target traversal each,
// until --tokens are committed.
void GenerateRun::generate_speculative(llama_context* ctx) {
  std::vector<llama_token> hist = prompt_tokens_;  // in the target's KV cache: all but the last committed
  const uint64_t t_dec = now_ns();
  while (tokens_.size() < cfg_.tokens) {
    if (auto why = stop_reason(); !why.empty()) {
      run_error_ = why;
      break;
    }
    const size_t left = cfg_.tokens - tokens_.size();
    const uint32_t k = static_cast<uint32_t>(std::min<size_t>(cfg_.draft_max, left - 1));
    hist.push_back(tokens_.back());
    const uint64_t t1 = now_ns();  // decode_ns: the proposal and the verification
    const std::vector<llama_token> draft = propose(hist, k);
    std::vector<llama_token> in{tokens_.back()};
    in.insert(in.end(), draft.begin(), draft.end());
    const size_t pos = hist.size() - 1;
    if (pager_ && left <= k + 1) pager_->set_readahead_horizon((pass_ + 1) * S_ - 1);  // may be the last traversal
    llama_batch b = make_batch(in.data(), in.size(), pos, true);
    const int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    finish_pass();
    if (rc != 0) throw RunError("llama_decode of a verification failed (status " + std::to_string(rc) + ")");
    uint32_t accepted = 0;
    for (uint32_t i = 0; i <= k; ++i) {
      const float* row = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
      if (!row) throw RunError("llama.cpp returned no logits in a verification");
      const llama_token tok = argmax(row);
      tokens_.push_back(tok);
      take_row(static_cast<uint32_t>(tokens_.size() - 1), row);
      if (i == k || tok != draft[i]) break;
      hist.push_back(tok);  // agreed: in the target's cache, and the draft's if it fed it
      ++accepted;
    }
    decode_ns_ += now_ns() - t1;
    // The target's cache keeps the last committed input and the agreed proposal; the draft's
    // the prefix of hist it fed (it never fed its own last proposal).
    llama_memory_seq_rm(llama_get_memory(ctx), 0, static_cast<llama_pos>(pos + 1 + accepted), -1);
    spec_.n_past = std::min(spec_.n_past + std::min(accepted, k > 0 ? k - 1 : 0), hist.size());
    ++spec_.traversals;
    spec_.drafted += k;
    spec_.accepted += accepted;
    spec_.rows_traversed += k + 1;
    if (k > 0 && accepted == k) ++spec_.full_groups;
    progress_line(static_cast<uint32_t>(tokens_.size()), tokens_.size() == cfg_.tokens);
  }
  decode_wall_ns_ = now_ns() - t_dec;
}

nlohmann::json GenerateRun::speculative_json() const {
  if (cfg_.draft.empty()) return nullptr;
  const uint64_t decode_outputs = tokens_.size() > 1 ? tokens_.size() - 1 : 0;
  return {{"draft", cfg_.draft},
          {"draft_max", cfg_.draft_max},
          {"traversals", spec_.traversals},
          {"drafted", spec_.drafted},
          {"accepted", spec_.accepted},
          {"full_groups", spec_.full_groups},
          {"rows_traversed", spec_.rows_traversed},
          {"decode_outputs", decode_outputs},
          {"outputs_per_traversal",
           spec_.traversals ? static_cast<double>(decode_outputs) / static_cast<double>(spec_.traversals) : 0.0},
          {"draft_ns", spec_.draft_ns},
          {"draft_load_ns", spec_.load_ns},
          {"draft_load_bytes_read", spec_.load_bytes_read}};
}

}  // namespace resid
