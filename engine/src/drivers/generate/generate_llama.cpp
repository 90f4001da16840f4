// `generate`'s driver thread: llama.cpp loads the model (through the pager's region, or the
// kernel's mapping for arm A), decodes greedily, and every logit row goes to logits.f32 and
// its sha256 (docs/run-contract.md).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/fsutil.hpp"
#include "core/proc_io.hpp"
#include "core/sha256.hpp"
#include "drivers/generate/generate_run.hpp"
#include "ggml-cpu.h"
#include "ggml.h"

// llama.cpp's own list of a model's tensors: declared in the pinned commit's src/llama-model.h
// ("for internal test use"), defined in libllama, not in llama.h. The load check below is
// the only user.
const std::vector<std::pair<std::string, ggml_tensor*>>& llama_internal_get_tensor_map(const llama_model* model);

namespace resid {

namespace {

// llama.cpp's and ggml's log: kept (not printed), so stderr carries only the contract's lines;
// the errors logged since the last clear are quoted when a load fails (llama.cpp logs the
// reason first, then "failed to load model").
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> errors;
  bool in_error = false;
  static void cb(ggml_log_level level, const char* text, void* user) {
    auto* self = static_cast<LogCapture*>(user);
    std::lock_guard lk(self->mu);
    if (level == GGML_LOG_LEVEL_ERROR) {
      self->errors.push_back(text);
      self->in_error = true;
    } else if (level == GGML_LOG_LEVEL_CONT && self->in_error) {
      self->errors.back() += text;
    } else if (level != GGML_LOG_LEVEL_CONT) {
      self->in_error = false;
    }
  }
};
LogCapture g_log;

// A model file llama.cpp refused, explained (InputError text), from the errors it logged.
std::string refusal(const std::string& model, const std::string& arch) {
  const std::string why = llama_log_error();
  if (why.find("unknown model architecture") != std::string::npos)
    return "model " + model + ": architecture '" + arch + "' (general.architecture) is not one the pinned llama.cpp (" +
           RESID_LLAMA_COMMIT + ") knows";
  if (why.find("unsupported model architecture") != std::string::npos)
    return "model " + model + ": architecture '" + arch + "' is known to the pinned llama.cpp (" + RESID_LLAMA_COMMIT +
           "), which cannot run it as a model: " + why;
  return "llama.cpp could not load " + model + (why.empty() ? "" : ": " + why);
}

}  // namespace

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

void capture_llama_log() {
  llama_log_set(&LogCapture::cb, &g_log);
  ggml_log_set(&LogCapture::cb, &g_log);
}

std::string llama_log_error() {
  std::lock_guard lk(g_log.mu);
  std::string all;
  for (const auto& e : g_log.errors) all += (all.empty() ? "" : "; ") + one_line(e);
  return all;
}

void clear_llama_log_error() {
  std::lock_guard lk(g_log.mu);
  g_log.errors.clear();
  g_log.in_error = false;
}

// Before the pager and the manifest: llama.cpp reads the header and the vocabulary (no tensor
// is mapped), so an architecture it does not know, or a vocabulary it cannot load, is said
// first, before anything is set up for the model.
void check_loadable(const std::string& model, const GgufSummary& g) {
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  mp.load_mode = LLAMA_LOAD_MODE_NONE;
  mp.n_gpu_layers = 0;
  clear_llama_log_error();
  llama_model* probe = llama_model_load_from_file(model.c_str(), mp);
  if (!probe) throw InputError(refusal(model, g.architecture));
  llama_model_free(probe);
  clear_llama_log_error();
}

// ---- load ------------------------------------------------------------------------------------

// llama.cpp maps the model file: through the pager (the interposition answers with the
// region) or the kernel (arm A, observed). False with input_error_ or run_error_ set.
bool GenerateRun::load_model(llama_model*& model) {
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mode = LLAMA_LOAD_MODE_MMAP;
  mp.lazy_mode = LLAMA_LAZY_MODE_OFF;
  mp.use_extra_bufts = cfg_.repack;  // no repacking: every arm runs the same kernels on the same bytes
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
      input_error_ = refusal(cfg_.model, g_.architecture);
    return false;
  }
  if (pager_ ? !mr.interposed : mr.addr == 0) {
    run_error_ = std::string("mapping: llama.cpp did not map the model file") + (pager_ ? " through the pager" : "") +
                 " (mmap calls for the file: " + std::to_string(mr.mmap_calls) + ")";
    return false;
  }
  observer_.set_mapping(mr.addr, pager_ ? m_.file_bytes : mr.length);
  if (auto why = weight_not_file_backed(llama_internal_get_tensor_map(model), m_, mr.addr,
                                        pager_ ? m_.file_bytes : mr.length)) {
    input_error_ = "model " + cfg_.model + ": " + *why + "; the pager pages only weights llama.cpp uses in place from the file";
    return false;
  }
  if (!pager_) {
    kmap_base_ = reinterpret_cast<const std::byte*>(mr.addr);
    compute_chunk_runs(mr);
  }
  return true;
}

bool GenerateRun::make_context(llama_model* model, llama_context*& ctx, ggml_threadpool*& tp) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cfg_.ctx;
  cp.n_batch = cfg_.ctx;
  cp.n_ubatch = std::min<uint32_t>(cfg_.ctx, 512);
  cp.n_seq_max = 1;
  cp.n_threads = static_cast<int32_t>(a_.threads);
  cp.n_threads_batch = static_cast<int32_t>(a_.threads);
  cp.cb_eval = &EvalObserver::callback;
  cp.cb_eval_user_data = &observer_;
  cp.no_perf = true;
  const uint64_t t_ctx = now_ns();
  ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    input_error_ = "llama.cpp could not create a context (ctx " + std::to_string(cfg_.ctx) + ")" +
                   (llama_log_error().empty() ? "" : ": " + llama_log_error());
    return false;
  }
  // One persistent thread pool for every graph evaluation: the eval callback splits a pass
  // into one evaluation per object, and a pool made per evaluation would dominate.
  ggml_threadpool_params tpp = ggml_threadpool_params_default(static_cast<int>(a_.threads));
  tp = ggml_threadpool_new(&tpp);
  if (!tp) throw RunError("cannot create the ggml thread pool");
  llama_attach_threadpool(ctx, tp, tp);
  context_ns_ = now_ns() - t_ctx;
  touch_progress();
  return true;
}

// The prompt with the model's tokenizer (BOS as the model says); it and --tokens must fit
// --ctx. False with input_error_ set.
bool GenerateRun::tokenize_prompt(const llama_vocab* vocab) {
  std::vector<llama_token> buf(cfg_.prompt.size() + 8);
  auto tokenize = [&] {
    return llama_tokenize(vocab, cfg_.prompt.data(), static_cast<int32_t>(cfg_.prompt.size()), buf.data(),
                          static_cast<int32_t>(buf.size()), true, false);
  };
  int n = tokenize();
  if (n < 0) {
    buf.resize(static_cast<size_t>(-n));
    n = tokenize();
  }
  if (n <= 0) {
    input_error_ = "the prompt tokenizes to no tokens";
    return false;
  }
  buf.resize(static_cast<size_t>(n));
  prompt_tokens_ = std::move(buf);
  if (prompt_tokens_.size() + cfg_.tokens > cfg_.ctx) {
    input_error_ = "the prompt (" + std::to_string(prompt_tokens_.size()) + " tokens) plus --tokens " +
                   std::to_string(cfg_.tokens) + " does not fit --ctx " + std::to_string(cfg_.ctx);
    return false;
  }
  return true;
}

// ---- decode ----------------------------------------------------------------------------------

int32_t GenerateRun::argmax(const float* row) const {
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab_; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// Outside the timed part: the row goes to the file (written back and dropped from the page
// cache as we go, so it does not grow the process's memory) and is hashed.
void GenerateRun::take_row(uint32_t i, const float* row) {
  const size_t row_bytes = static_cast<size_t>(n_vocab_) * sizeof(float);
  if (!write_logits_) {  // the warm request: hashed only
    row_sha_.push_back(sha256_hex(row, row_bytes));
    return;
  }
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
}

std::string GenerateRun::stop_reason() const {
  if (pager_ && pager_->failed()) return "pager: " + pager_->error();
  if (audit_error_) return *audit_error_;
  if (const auto& why = observer_.stats().first_route_violation; !why.empty()) return why;
  return {};
}

// On a terminal: one line redrawn per token. With --progress-every N: a whole line every N
// tokens and at the last, so a log (the harness's residctl.stderr) shows how far a run got.
void GenerateRun::progress_line(uint32_t done, bool final) {
  const uint32_t every = cfg_.progress_every;
  const bool to_log = every > 0 && (done % every == 0 || final);
  if (!to_log && !::isatty(2)) return;
  const uint64_t io = proc_read_bytes().value_or(io0_.load()) - io0_.load();
  const PagerStats ps = pager_ ? pager_->stats() : PagerStats{};
  std::fprintf(stderr, "%sresidctl generate: progress %u/%u tokens, %.1f MB read, %llu faults%s",
               to_log ? "" : "\r", done, cfg_.tokens, static_cast<double>(io) / 1e6,
               static_cast<unsigned long long>(ps.faults_handled), to_log || final ? "\n" : "");
  std::fflush(stderr);
}

// Prefill (the prompt in one batch; its last row chooses token 0), then one pass per token.
void GenerateRun::generate_tokens(llama_context* ctx, const llama_vocab* vocab) {
  llama_batch batch = llama_batch_init(static_cast<int32_t>(prompt_tokens_.size()), 0, 1);
  for (size_t i = 0; i < prompt_tokens_.size(); ++i) {
    batch.token[i] = prompt_tokens_[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = i + 1 == prompt_tokens_.size();
  }
  batch.n_tokens = static_cast<int32_t>(prompt_tokens_.size());
  if (pager_ && cfg_.tokens == 1) pager_->set_readahead_horizon((pass_ + 1) * S_ - 1);  // F: no later pass
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
  if (spec_.ctx) return generate_speculative(ctx);
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
    token_hist_.record(now_ns() - t1);
    tokens_.push_back(tok);
    take_row(i, row);
    progress_line(i + 1, i + 1 == cfg_.tokens);
  }
  decode_wall_ns_ = now_ns() - t_dec;
  (void)vocab;
}

// ---- the driver thread -----------------------------------------------------------------------

std::string detokenize(const llama_vocab* vocab, const std::vector<llama_token>& tokens) {
  std::vector<char> tb(tokens.size() * 16 + 64);
  auto run = [&] {
    return llama_detokenize(vocab, tokens.data(), static_cast<int32_t>(tokens.size()), tb.data(),
                            static_cast<int32_t>(tb.size()), false, false);
  };
  int n = run();
  if (n < 0) {
    tb.resize(static_cast<size_t>(-n));
    n = run();
  }
  return std::string(tb.data(), static_cast<size_t>(std::max(n, 0)));
}

void GenerateRun::drive() {
  llama_model* model = nullptr;
  llama_context* ctx = nullptr;
  ggml_threadpool* tp = nullptr;
  auto teardown = [&] {
    free_draft();
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
    if (!load_model(model) || !make_context(model, ctx, tp)) return teardown();
    const llama_vocab* vocab = llama_model_get_vocab(model);
    n_vocab_ = llama_vocab_n_tokens(vocab);
    if (!tokenize_prompt(vocab)) return teardown();
    if (!cfg_.draft.empty()) {
      if (!load_draft(vocab, tp)) return teardown();
      io0_.fetch_add(spec_.load_bytes_read);  // the process's reads stay the target's
    }
    loaded_ = true;
    try {
      make_dirs(a_.out);
    } catch (const RunError& e) {
      input_error_ = std::string("--out: ") + e.what();
      return teardown();
    }
    if (!a_.calibrate) {
      logits_tmp_ = a_.out + "/logits.f32.tmp";
      logits_fd_ = ::open(logits_tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (logits_fd_ < 0) throw RunError("cannot create " + logits_tmp_ + ": " + errno_name(errno));
      in_generation_.store(true);
      const uint64_t misses0 = misses_.load(), io0 = proc_read_bytes().value_or(0);
      generate_tokens(ctx, vocab);
      if (cfg_.warm_request && run_error_.empty()) {
        requests_.push_back(request_log("primary", vocab, misses0, io0));
        serve_warm_request(ctx, vocab);
      }
      release_held();    // held-consumer fired at the last step: let go before the shutdown
      probe_shutdown();  // shutdown-live-consumer
      t_end_.store(now_ns());
      if (pager_) region_huge_bytes_ = pager_->region_huge_bytes();
      io_end_.store(proc_read_bytes().value_or(io0_.load()));
      if (tokens_.size() < cfg_.tokens && ::isatty(2)) std::fputc('\n', stderr);
      in_generation_.store(false);
      if (run_error_.empty()) run_error_ = stop_reason();
      if (run_error_.empty() && pass_ < kAuditPasses)
        if (auto e = startup_audit_error(audit_, m_, static_cast<uint32_t>(pass_))) run_error_ = *e;
      text_ = detokenize(vocab, tokens_);
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

}  // namespace resid
