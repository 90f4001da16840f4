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
    case GGUF_TYPE_UINT16: return gguf_get_val_u16(g, id);
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

// A graph plan's integer `key` of `j`, in [lo, hi]. InputError otherwise: a float or an
// out-of-range number would be converted with undefined behaviour (found by the graph_plan
// fuzz target: an occurrence of 1e66).
int64_t plan_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi) {
  const nlohmann::json& v = j.at(key);
  const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                         : v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!ok)
    throw InputError("--graph-plan: \"" + std::string(key) + "\" is " + v.dump() + ", not an integer from " +
                     std::to_string(lo) + " to " + std::to_string(hi));
  return v.get<int64_t>();
}

uint32_t plan_occurrence(const nlohmann::json& j) { return static_cast<uint32_t>(plan_int(j, "occurrence", 0, UINT32_MAX)); }

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
  // One file is one model: the pager maps one file, and llama.cpp would map the other parts
  // of a split GGUF (split.count > 1) beside it, unpaged.
  const uint32_t split_count = u32_key(g, "split.count").value_or(1);
  const uint32_t split_no = u32_key(g, "split.no").value_or(0);
  if (s.architecture.empty() || split_count > 1) {
    gguf_free(g);
    if (split_count > 1)
      throw InputError("model " + path + " is part " + std::to_string(split_no + 1) + " of a split GGUF (split.count = " +
                       std::to_string(split_count) + "): the pager maps one file; merge the parts into one GGUF first "
                       "(llama-gguf-split --merge)");
    throw InputError("model " + path + " has no general.architecture: not a model GGUF llama.cpp can load");
  }
  s.n_expert = u32_key(g, s.architecture + ".expert_count").value_or(0);
  s.n_expert_used = u32_key(g, s.architecture + ".expert_used_count").value_or(0);
  s.expert_gating_func = u32_key(g, s.architecture + ".expert_gating_func");
  const int64_t n = gguf_get_n_tensors(g);
  s.tensors.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    TensorInfo t;
    t.name = gguf_get_tensor_name(g, i);
    t.type = ggml_type_name(gguf_get_tensor_type(g, i));
    t.offset = s.data_offset + gguf_get_tensor_offset(g, i);
    t.bytes = gguf_get_tensor_size(g, i);
    const int64_t* ne = gguf_get_tensor_ne(g, i);
    int dims = GGML_MAX_DIMS;
    while (dims > 1 && ne[dims - 1] == 1) --dims;  // ggml_n_dims: trailing dimensions of 1 dropped
    t.shape.assign(ne, ne + dims);
    s.tensors.push_back(std::move(t));
  }
  gguf_free(g);
  if (s.data_offset > s.file_bytes)
    throw InputError("model file " + path + " truncated: its tensor data would start at byte " +
                     std::to_string(s.data_offset) + " but the file has " + std::to_string(s.file_bytes));
  return s;
}

std::optional<std::string> weight_not_file_backed(const std::vector<std::pair<std::string, ggml_tensor*>>& weights,
                                                  const Manifest& m, uintptr_t base, uint64_t length) {
  std::unordered_map<std::string, uint64_t> offset;
  for (const auto& t : m.tensors) offset.emplace(t.name, t.offset);
  for (const auto& [name, t] : weights) {
    const auto it = offset.find(name);
    if (!t || it == offset.end()) return "llama.cpp holds a weight " + name + " that the GGUF's tensor table does not list";
    const std::string buf = t->buffer ? std::string(" (") + ggml_backend_buffer_name(t->buffer) + " buffer)" : "";
    const auto a = reinterpret_cast<uintptr_t>(t->data);
    if (!t->data || a < base || a - base >= length)
      return "tensor " + name + " is not file-backed after loading: llama.cpp holds it outside the model's mapping" + buf +
             " (repacked or converted at load)";
    if (a - base != it->second)
      return "tensor " + name + " is not file-backed after loading: llama.cpp reads it at file offset " +
             std::to_string(a - base) + ", the GGUF puts it at " + std::to_string(it->second) + buf;
  }
  return std::nullopt;
}

EvalObserver::EvalObserver(const Manifest& m, StepListener& listener)
    : m_(m), l_(listener), expert_layer_(m.tensors.size(), -1), routed_(m.n_layer, 0), demand_(m) {
  for (const auto& o : m.objects)
    for (uint32_t t : o.expert_tensors) expert_layer_[t] = o.layer;
}

bool EvalObserver::callback(ggml_tensor* t, bool ask, void* user_data) {
  auto* self = static_cast<EvalObserver*>(user_data);
  if (ask) return self->ask(t);
  self->done(t);
  return true;  // false would stop the graph evaluation
}

bool EvalObserver::ask(ggml_tensor* t) {
  ++st_.nodes;
  if (!in_pass_ || (cur_ > 0 && reads_token_embedding_rows(t))) start_pass(t);  // a new graph
  const uint32_t occurrence = ++occurrences_[t->name];
  node_occurrence_ = occurrence;
  ++pass_node_;
  graph_.node(t);
  bool want = discovering_ || route_layer(t).has_value();
  if (discovering_) {
    discover(t);
  } else {
    if (is_release(t, occurrence)) want = true;  // checked first: a node may be both
    if (is_boundary(t, occurrence)) want = true;
  }
  audit_sources(t);
  prev_name_ = t->name;
  prev_occurrence_ = occurrence;
  return want;
}

// The first node of a pass: the token embedding's GET_ROWS. Its graph shape (the batch's
// token count) picks the learned boundaries, or makes this a discovery pass.
void EvalObserver::start_pass(ggml_tensor* first) {
  auto rows = embd_rows(first);
  ++(rows ? st_.embd_rows_read : st_.embd_rows_unread);
  l_.pass_started(std::move(rows));  // ends the previous pass first (a second graph of one decode)
  graph_.start_pass();
  routed_.assign(m_.n_layer, 0);
  in_pass_ = true;
  occurrences_.clear();
  next_boundary_ = 0;
  pending_ = nullptr;
  pending_obj_ = -1;
  next_release_ = 0;
  pending_release_ = nullptr;
  pass_node_ = 0;
  released_.assign(m_.tensors.size(), 0);
  last_read_.assign(m_.tensors.size(), {});
  shape_ = first->op == GGML_OP_GET_ROWS && first->src[1] ? ggml_nelements(first->src[1]) : -1;
  discovering_ = !plans_.count(shape_);
  clean_ = true;
  learning_.clear();
  if (discovering_) ++st_.discovery_passes;
  cur_ = 0;
  ++st_.boundaries;
}

// GET_ROWS of a tensor of the embd object (object 0): the first node of a graph.
bool EvalObserver::reads_token_embedding_rows(const ggml_tensor* t) const {
  if (t->op != GGML_OP_GET_ROWS || !t->src[0] || !t->src[0]->data || base_ == 0) return false;
  const auto a = reinterpret_cast<uintptr_t>(t->src[0]->data);
  if (a < base_ || a >= base_ + len_) return false;
  const auto ti = m_.tensor_at(a - base_);
  return ti && m_.object_has_tensor(0, *ti);
}

// The smallest object after the current one that holds a weight this node reads, when the
// current object holds none of them (then the node is that object's first weight read).
std::optional<uint32_t> EvalObserver::next_object_read(const ggml_tensor* t) const {
  std::optional<uint32_t> next;
  for (int i = 0; i < GGML_MAX_SRC; ++i) {
    const ggml_tensor* s = t->src[i];
    if (!s || !s->data || base_ == 0) continue;
    const auto a = reinterpret_cast<uintptr_t>(s->data);
    if (a < base_ || a >= base_ + len_) continue;
    const auto ti = m_.tensor_at(a - base_);
    if (!ti) continue;
    if (cur_ >= 0 && m_.object_has_tensor(static_cast<uint32_t>(cur_), *ti)) return std::nullopt;
    for (uint32_t o = static_cast<uint32_t>(cur_ + 1); o < m_.objects.size(); ++o)
      if (m_.object_has_tensor(o, *ti)) {
        if (!next || o < *next) next = o;
        break;
      }
  }
  return next;
}

// Discovery: every node is wanted, so at this ask=true call every earlier node is computed.
// A node that first reads the next object's weights enters it now; the node before it is
// learned as the object's boundary.
void EvalObserver::discover(const ggml_tensor* t) {
  const auto next = next_object_read(t);
  if (!next) return;
  if (*next != static_cast<uint32_t>(cur_ + 1)) {
    ++st_.out_of_order;
    clean_ = false;
  }
  learning_.push_back({prev_name_, prev_occurrence_, *next});
  cur_ = static_cast<int>(*next);
  ++st_.boundaries;
  l_.object_entered(*next);
}

bool EvalObserver::is_boundary(const ggml_tensor* t, uint32_t occurrence) {
  const auto& plan = plans_.at(shape_).boundaries;
  if (next_boundary_ >= plan.size()) return false;
  const Boundary& b = plan[next_boundary_];
  if (occurrence != b.occurrence || b.name != t->name) return false;
  ++next_boundary_;
  pending_ = t;
  pending_obj_ = static_cast<int>(b.object);
  return true;
}

bool EvalObserver::is_release(const ggml_tensor* t, uint32_t occurrence) {
  if (!tensor_signals_) return false;
  const auto& rs = plans_.at(shape_).releases;
  if (next_release_ >= rs.size()) return false;
  const Release& r = rs[next_release_];
  if (occurrence != r.occurrence || r.name != t->name) return false;
  pending_release_ = t;
  pending_release_idx_ = next_release_++;
  return true;
}

// Discovery: the latest read of each tensor while its own object is current.
void EvalObserver::learn_read(const ggml_tensor* t, uint32_t tensor) {
  if (!tensor_signals_ || !discovering_ || cur_ <= 0) return;  // embd: one node, its boundary is its release
  last_read_[tensor] = {t->name, node_occurrence_, pass_node_, cur_};
}

// The release nodes of a clean discovery pass, in node order, tensors grouped per node.
std::vector<EvalObserver::Release> EvalObserver::learned_releases() const {
  std::map<uint64_t, Release> by_node;
  for (uint32_t i = 0; i < last_read_.size(); ++i) {
    const LastRead& lr = last_read_[i];
    if (lr.object <= 0) continue;
    Release& r = by_node[lr.node];
    r.name = lr.name;
    r.occurrence = lr.occurrence;
    r.object = static_cast<uint32_t>(lr.object);
    r.tensors.push_back(i);
  }
  return prune_releases(by_node);
}

// The tensors of the objects after embd in the order of their last read (the compute order,
// for tensors read once): the release plan before pruning, written to the plan file so an
// analysis can rebuild the pass's tensor-granular reference string.
std::vector<uint32_t> EvalObserver::learned_read_order() const {
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> by_node;
  for (uint32_t i = 0; i < last_read_.size(); ++i)
    if (last_read_[i].object > 0) by_node[{last_read_[i].node, i}] = i;
  std::vector<uint32_t> out;
  for (const auto& [key, t] : by_node) out.push_back(t);
  return out;
}

// Only release nodes that let a chunk go are wanted (each wanted node splits the graph's
// computation): a node after which no chunk of its object has every tensor over it consumed
// hands its tensors on to the object's next release node; those of the object's last such
// node are let go at the boundary anyway.
std::vector<EvalObserver::Release> EvalObserver::prune_releases(std::map<uint64_t, Release>& by_node) const {
  std::map<uint32_t, std::map<uint64_t, int>> cover;  // object -> chunk -> tensors not yet released
  for (const auto& [node, r] : by_node) {
    if (cover.count(r.object)) continue;
    auto& cv = cover[r.object];
    for (uint32_t t : m_.objects[r.object].tensors)
      if (m_.tensors[t].bytes > 0)
        for (auto [c, e] = tensor_chunk_range(m_.tensors[t], m_.chunk_size); c <= e; ++c) ++cv[c];
  }
  std::vector<Release> out;
  std::map<uint32_t, std::vector<uint32_t>> carried;  // object -> tensors handed on
  for (auto& [node, r] : by_node) {
    auto& cv = cover[r.object];
    std::vector<uint32_t> ts = std::move(carried[r.object]);
    ts.insert(ts.end(), r.tensors.begin(), r.tensors.end());
    carried[r.object].clear();
    bool frees = false;
    for (uint32_t t : r.tensors) {
      if (m_.tensors[t].bytes == 0) continue;
      for (auto [c, e] = tensor_chunk_range(m_.tensors[t], m_.chunk_size); c <= e; ++c) frees |= --cv[c] == 0;
    }
    if (!frees) {
      carried[r.object] = std::move(ts);
      continue;
    }
    r.tensors = std::move(ts);
    out.push_back(std::move(r));
  }
  return out;
}

void EvalObserver::release(const Release& r) {
  if (cur_ != static_cast<int>(r.object)) return;  // its object is not current: the plan does not fit this pass
  for (uint32_t t : r.tensors) released_[t] = 1;
  ++st_.releases;
  st_.tensors_released += r.tensors.size();
  l_.tensors_consumed(r.object, r.tensors);
}

// A read of a tensor this pass already released: the learned release node was not its last reader.
void EvalObserver::check_released(const ggml_tensor* t, uint32_t tensor) {
  if (!released_[tensor]) return;
  released_[tensor] = 0;  // held again (below) until the step ends
  l_.tensor_reread(static_cast<uint32_t>(cur_), tensor);
  ++st_.reads_after_release;
  if (st_.first_violation.empty())
    st_.first_violation = std::string("node ") + t->name + " (" + ggml_op_desc(t) + ") reads " + m_.tensors[tensor].name +
                          " after its release node in this pass (the learned release plan does not fit this graph)";
}

void EvalObserver::end_pass() {
  // A clean discovery pass (every object in order, no foreign read) teaches its shape.
  if (in_pass_ && discovering_ && clean_ && st_.foreign_reads == 0 && cur_ + 1 == static_cast<int>(m_.objects.size()))
    plans_[shape_] = tensor_signals_ ? ShapePlan{learning_, learned_releases(), learned_read_order()} : ShapePlan{learning_, {}, {}};
  in_pass_ = false;
  discovering_ = false;
  cur_ = -1;
  graph_.end_pass();
}

nlohmann::json EvalObserver::plans_json() const {
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& [tokens, plan] : plans_) {
    nlohmann::json bs = nlohmann::json::array();
    for (const Boundary& b : plan.boundaries)
      bs.push_back({{"node", b.name}, {"occurrence", b.occurrence}, {"object", m_.objects[b.object].name}});
    nlohmann::json shape = {{"tokens", tokens}, {"boundaries", bs}};
    if (tensor_signals_) {
      nlohmann::json rs = nlohmann::json::array();
      for (const Release& r : plan.releases) {
        nlohmann::json names = nlohmann::json::array();
        for (uint32_t t : r.tensors) names.push_back(m_.tensors[t].name);
        rs.push_back({{"node", r.name}, {"occurrence", r.occurrence}, {"object", m_.objects[r.object].name}, {"tensors", names}});
      }
      shape["releases"] = rs;
      nlohmann::json order = nlohmann::json::array();
      for (uint32_t t : plan.read_order) order.push_back(m_.tensors[t].name);
      shape["read_order"] = order;
    }
    shapes.push_back(shape);
  }
  return {{"schema_version", 1}, {"objects", m_.objects.size()}, {"shapes", shapes}};
}

void EvalObserver::load_plans(const nlohmann::json& j) {
  std::map<std::string, uint32_t> index, tensor;
  for (uint32_t o = 0; o < m_.objects.size(); ++o) index[m_.objects[o].name] = o;
  for (uint32_t t = 0; t < m_.tensors.size(); ++t) tensor[m_.tensors[t].name] = t;
  const auto object_of = [&](const nlohmann::json& b) {
    const auto it = index.find(b.at("object").get<std::string>());
    if (it == index.end())
      throw InputError("--graph-plan names object '" + b.at("object").get<std::string>() + "', which this model does not have");
    return it->second;
  };
  for (const auto& s : j.at("shapes")) {
    ShapePlan plan;
    for (const auto& b : s.at("boundaries"))
      plan.boundaries.push_back({b.at("node").get<std::string>(), plan_occurrence(b), object_of(b)});
    if (tensor_signals_ && !s.contains("releases"))
      throw InputError("--graph-plan has no release nodes (it was written without --consumption tensor)");
    for (const auto& r : s.value("releases", nlohmann::json::array())) {
      Release rel{r.at("node").get<std::string>(), plan_occurrence(r), object_of(r), {}};
      for (const auto& n : r.at("tensors")) {
        const auto it = tensor.find(n.get<std::string>());
        if (it == tensor.end() || !m_.object_has_tensor(rel.object, it->second))
          throw InputError("--graph-plan releases tensor '" + n.get<std::string>() + "', which object " +
                           m_.objects[rel.object].name + " of this model does not have");
        rel.tensors.push_back(it->second);
      }
      plan.releases.push_back(std::move(rel));
    }
    for (const auto& n : s.value("read_order", nlohmann::json::array()))
      if (const auto it = tensor.find(n.get<std::string>()); it != tensor.end()) plan.read_order.push_back(it->second);
    plans_[plan_int(s, "tokens", INT64_MIN, INT64_MAX)] = std::move(plan);
  }
}

void EvalObserver::load_plans_text(std::string_view text, const std::string& path) {
  try {
    load_plans(nlohmann::json::parse(text));
  } catch (const nlohmann::json::exception& e) {
    throw InputError("--graph-plan " + path + " is not a graph plan (" + e.what() + ")");
  }
}

void EvalObserver::done(ggml_tensor* t) {
  if (t == pending_release_) {
    pending_release_ = nullptr;
    release(plans_.at(shape_).releases[pending_release_idx_]);
  }
  if (t == pending_ && pending_obj_ >= 0) {
    cur_ = pending_obj_;
    pending_ = nullptr;
    pending_obj_ = -1;
    ++st_.boundaries;
    l_.object_entered(static_cast<uint32_t>(cur_));
    return;
  }
  if (auto layer = route_layer(t)) read_routes(t, *layer);
}

std::optional<int> EvalObserver::route_layer(const ggml_tensor* t) const {
  const std::string prefix = route_node_ + "-";
  return suffix_int(t->name, prefix.c_str());
}

// The router's selection of layer N: per token (column), the experts picked.
void EvalObserver::read_routes(ggml_tensor* t, int layer) {
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
  if (layer >= 0 && static_cast<size_t>(layer) < routed_.size()) routed_[static_cast<size_t>(layer)] = 1;
  ++st_.route_events;
  graph_.router(t);
  l_.routes(layer, std::move(rows));
}

// A read of an expert tensor of layer N needs layer N's routes of this pass, and the node's
// expert ids must be the route node itself.
void EvalObserver::check_routes(const ggml_tensor* t, uint32_t tensor) {
  const int layer = expert_layer_[tensor];
  const std::string want = route_node_ + "-" + std::to_string(layer);
  std::string why;
  if (!routed_[static_cast<size_t>(layer)])
    why = "no " + want + " node was read before it in this pass (the router's selection is read there, before the "
          "expert kernel)";
  else if (t->src[2] && want != t->src[2]->name)
    why = std::string("its expert ids are ") + t->src[2]->name + ", not the " + want + " node whose routes were read";
  if (why.empty()) return;
  ++st_.route_violations;
  if (st_.first_route_violation.empty())
    st_.first_route_violation = std::string("routes: node ") + t->name + " (" + ggml_op_desc(t) + ") reads expert tensor " +
                                m_.tensors[tensor].name + ", but " + why;
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
      if (ti) {
        const bool expert = expert_layer_[*ti] >= 0;
        demand_.weight_read(t, i, s, *ti, expert, a - base_);
        if (expert && !is_view_op(t)) {
          graph_.expert_kernel(t, s);
          check_routes(t, *ti);
        }
      }
      const bool ok = ti && cur_ >= 0 && m_.object_has_tensor(static_cast<uint32_t>(cur_), *ti);
      if (ok) {
        learn_read(t, *ti);
        check_released(t, *ti);
      }
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
