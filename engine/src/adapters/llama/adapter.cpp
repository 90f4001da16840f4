#include "adapters/llama/adapter.hpp"

#include <sys/stat.h>

#include <charconv>
#include <cstring>

#include "core/errors.hpp"
#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"

namespace resid {

namespace {

std::optional<uint32_t> u32_key(const gguf_context* g, const std::string& key) {
  const int64_t id = gguf_find_key(g, key.c_str());
  if (id < 0) return std::nullopt;
  switch (gguf_get_kv_type(g, id)) {
    case GGUF_TYPE_UINT32: return gguf_get_val_u32(g, id);
    case GGUF_TYPE_INT32: return static_cast<uint32_t>(gguf_get_val_i32(g, id));
    case GGUF_TYPE_UINT64: return static_cast<uint32_t>(gguf_get_val_u64(g, id));
    default: return std::nullopt;
  }
}

// "<prefix><N>" -> N
std::optional<int> suffix_int(const char* name, const char* prefix) {
  const size_t n = std::strlen(prefix);
  if (std::strncmp(name, prefix, n) != 0) return std::nullopt;
  const char* b = name + n;
  const char* e = b + std::strlen(b);
  int v = 0;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || p == b) return std::nullopt;
  return v;
}

}  // namespace

GgufSummary read_gguf(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) throw InputError("model file " + path + " cannot be opened (" + errno_name(errno) + ")");
  if (!S_ISREG(st.st_mode)) throw InputError("model file " + path + " is not a regular file");
  gguf_init_params p{};
  p.no_alloc = true;
  p.ctx = nullptr;
  gguf_context* g = gguf_init_from_file(path.c_str(), p);
  if (!g) throw InputError("model file " + path + " is not a readable GGUF (header or tensor table corrupt or truncated)");
  GgufSummary s;
  s.file_bytes = static_cast<uint64_t>(st.st_size);
  s.data_offset = gguf_get_data_offset(g);
  if (const int64_t id = gguf_find_key(g, "general.architecture"); id >= 0 && gguf_get_kv_type(g, id) == GGUF_TYPE_STRING)
    s.architecture = gguf_get_val_str(g, id);
  s.n_expert = u32_key(g, s.architecture + ".expert_count").value_or(0);
  s.n_expert_used = u32_key(g, s.architecture + ".expert_used_count").value_or(0);
  const int64_t n = gguf_get_n_tensors(g);
  s.tensors.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    TensorInfo t;
    t.name = gguf_get_tensor_name(g, i);
    t.type = ggml_type_name(gguf_get_tensor_type(g, i));
    t.offset = s.data_offset + gguf_get_tensor_offset(g, i);
    t.bytes = gguf_get_tensor_size(g, i);
    s.tensors.push_back(std::move(t));
  }
  gguf_free(g);
  if (s.data_offset > s.file_bytes)
    throw InputError("model file " + path + " truncated: its tensor data would start at byte " +
                     std::to_string(s.data_offset) + " but the file has " + std::to_string(s.file_bytes));
  return s;
}

bool EvalObserver::callback(ggml_tensor* t, bool ask, void* user_data) {
  auto* self = static_cast<EvalObserver*>(user_data);
  if (ask) return self->ask(t);
  self->done(t);
  return true;  // false would stop the graph evaluation
}

bool EvalObserver::ask(ggml_tensor* t) {
  ++st_.nodes;
  const char* name = t->name;
  bool want = false;
  const int n_layer = static_cast<int>(m_.n_layer);
  if (std::strcmp(name, "embd") == 0) {
    // The graph's first node: nothing of this pass is computed yet.
    auto rows = embd_rows(t);
    ++(rows ? st_.embd_rows_read : st_.embd_rows_unread);
    l_.pass_started(std::move(rows));
    cur_ = 0;
    ++st_.boundaries;
  } else if (auto l = suffix_int(name, "norm-")) {
    // The first RMS_NORM of layer l follows the previous object (embd is object 0, layer.N
    // is object N + 1); the second one (before ffn_norm-l) finds layer.l current.
    if (*l >= 0 && *l < n_layer && cur_ == *l) {
      want = true;
      pending_ = t;
      pending_obj_ = *l + 1;
    }
  } else if (std::strcmp(name, "norm") == 0) {
    if (cur_ == n_layer) {
      want = true;
      pending_ = t;
      pending_obj_ = n_layer + 1;
    }
  } else if (suffix_int(name, "ffn_moe_topk-")) {
    want = true;
  }
  audit_sources(t);
  return want;
}

void EvalObserver::done(ggml_tensor* t) {
  if (t == pending_ && pending_obj_ >= 0) {
    cur_ = pending_obj_;
    pending_ = nullptr;
    pending_obj_ = -1;
    ++st_.boundaries;
    l_.object_entered(static_cast<uint32_t>(cur_));
    return;
  }
  if (auto layer = suffix_int(t->name, "ffn_moe_topk-")) {
    if (t->type != GGML_TYPE_I32 || !t->data) return;
    std::vector<std::vector<int32_t>> rows(static_cast<size_t>(t->ne[1]));
    const auto* base = static_cast<const char*>(t->data);
    for (int64_t r = 0; r < t->ne[1]; ++r) {
      rows[static_cast<size_t>(r)].reserve(static_cast<size_t>(t->ne[0]));
      for (int64_t k = 0; k < t->ne[0]; ++k) {
        int32_t v;
        std::memcpy(&v, base + r * t->nb[1] + k * t->nb[0], sizeof v);
        rows[static_cast<size_t>(r)].push_back(v);
      }
    }
    l_.routes(*layer, std::move(rows));
  }
}

std::optional<std::vector<uint32_t>> EvalObserver::embd_rows(const ggml_tensor* t) const {
  // embd = GET_ROWS(token_embd [n_embd, n_vocab], tokens I32 [n_tokens]): row r of the
  // embedding is [data + r * nb[1], + ggml_row_size(type, ne[0])). The input tensor is set
  // before the graph is computed, so its ids are readable at the ask=true call.
  if (t->op != GGML_OP_GET_ROWS) return std::nullopt;
  const ggml_tensor* w = t->src[0];
  const ggml_tensor* ids = t->src[1];
  if (!w || !ids || !w->data || !ids->data || ids->type != GGML_TYPE_I32 || base_ == 0) return std::nullopt;
  const auto a = reinterpret_cast<uintptr_t>(w->data);
  if (a < base_ || a >= base_ + len_) return std::nullopt;
  const uint64_t row_bytes = ggml_row_size(w->type, w->ne[0]);
  if (static_cast<uint64_t>(w->nb[1]) != row_bytes || ggml_nrows(w) != w->ne[1]) return std::nullopt;  // not plain rows
  std::vector<int32_t> tok;
  const int64_t n = ggml_nelements(ids);
  tok.reserve(static_cast<size_t>(n));
  const auto* p = static_cast<const char*>(ids->data);
  if (!ggml_is_contiguous(ids)) return std::nullopt;
  for (int64_t i = 0; i < n; ++i) {
    int32_t v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(int32_t)), sizeof v);
    tok.push_back(v);
  }
  return row_chunks(a - base_, ggml_nbytes(w), row_bytes, tok, m_.chunk_size);
}

void EvalObserver::audit_sources(const ggml_tensor* t) {
  for (int i = 0; i < GGML_MAX_SRC; ++i) {
    const ggml_tensor* s = t->src[i];
    if (!s || !s->data) continue;
    // Weights are the tensors of the model's weight buffers (llama.cpp marks them). The
    // address alone would not do: the ranges llama.cpp unmapped from the mapping (the GGUF
    // header) can be reused by other allocations, e.g. the KV cache.
    const ggml_backend_buffer_t buf = s->buffer ? s->buffer : (s->view_src ? s->view_src->buffer : nullptr);
    if (!buf || ggml_backend_buffer_get_usage(buf) != GGML_BACKEND_BUFFER_USAGE_WEIGHTS) continue;
    const auto a = reinterpret_cast<uintptr_t>(s->data);
    if (base_ != 0 && a >= base_ && a < base_ + len_) {
      ++st_.weight_reads;
      const auto ti = m_.tensor_at(a - base_);
      const bool ok = ti && cur_ >= 0 && m_.object_has_tensor(static_cast<uint32_t>(cur_), *ti);
      if (!ok) {
        ++st_.foreign_reads;
        if (st_.first_violation.empty())
          st_.first_violation = std::string("node ") + t->name + " (" + ggml_op_desc(t) + ") reads " +
                                (ti ? m_.tensors[*ti].name : "file offset " + std::to_string(a - base_)) +
                                " while " + (cur_ >= 0 ? "object " + m_.objects[static_cast<size_t>(cur_)].name : std::string("no object")) +
                                " is current";
      }
    } else {
      ++st_.outside_reads;
      if (st_.first_violation.empty())
        st_.first_violation = std::string("node ") + t->name + " reads weight " + s->name +
                              " from a buffer outside the model mapping (repacked or copied)";
    }
  }
}

}  // namespace resid
