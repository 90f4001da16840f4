#include "adapters/llama/objects.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "core/errors.hpp"

namespace resid {

const char* to_string(ObjectKind k) {
  switch (k) {
    case ObjectKind::Embd: return "embd";
    case ObjectKind::Layer: return "layer";
    case ObjectKind::Expert: return "expert";
    case ObjectKind::Output: return "output";
  }
  return "?";
}

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// "blk.N.<rest>" -> N
std::optional<uint32_t> layer_of(const std::string& name) {
  if (!starts_with(name, "blk.")) return std::nullopt;
  const char* b = name.data() + 4;
  const char* e = name.data() + name.size();
  uint32_t n = 0;
  auto [p, ec] = std::from_chars(b, e, n);
  if (ec != std::errc() || p == b || p == e || *p != '.') return std::nullopt;
  return n;
}

// blk.N.ffn_gate_exps.weight, ffn_up_exps, ffn_down_exps, ffn_gate_up_exps (and their
// biases): the experts stacked along the last dimension.
bool is_expert_tensor(const std::string& name) { return name.find("_exps.") != std::string::npos; }

bool is_shared_rope(const std::string& name) {
  return starts_with(name, "rope_freqs.") || starts_with(name, "rope_factors_long.") ||
         starts_with(name, "rope_factors_short.");
}

}  // namespace

namespace {

// Tensors sorted by offset, inside the file and not overlapping (InputError naming one).
void check_tensor_extents(std::vector<TensorInfo>& tensors, uint64_t file_bytes, uint64_t data_offset) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorInfo& a, const TensorInfo& b) { return a.offset < b.offset; });
  uint64_t prev_end = data_offset;
  std::string prev_name = "the GGUF header";
  for (const auto& t : tensors) {
    if (t.offset < data_offset || t.bytes > file_bytes || t.offset > file_bytes - t.bytes)
      throw InputError("model file truncated or corrupt: tensor " + t.name + " spans [" + std::to_string(t.offset) +
                       ", " + std::to_string(t.offset + t.bytes) + ") but the file has " +
                       std::to_string(file_bytes) + " bytes");
    if (t.bytes > 0 && t.offset < prev_end)
      throw InputError("model file corrupt: tensor " + t.name + " at offset " + std::to_string(t.offset) +
                       " overlaps " + prev_name);
    if (t.bytes > 0) {
      prev_end = t.offset + t.bytes;
      prev_name = t.name;
    }
  }
}

// The tensors by the object they belong to, from their names.
struct Classified {
  std::optional<uint32_t> embd;
  std::vector<uint32_t> embd_tensors, output_tensors, shared;
  std::map<uint32_t, std::vector<uint32_t>> layers;
  bool has_output_weight = false;
};

Classified classify(const std::vector<TensorInfo>& tensors) {
  Classified c;
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].name;
    if (auto l = layer_of(name)) {
      c.layers[*l].push_back(i);
    } else if (starts_with(name, "token_embd.")) {
      c.embd_tensors.push_back(i);  // the weight and any companions (a bias) form embd
      if (name == "token_embd.weight") c.embd = i;
    } else if (starts_with(name, "output_norm.") || starts_with(name, "output.")) {
      c.output_tensors.push_back(i);
      if (name == "output.weight") c.has_output_weight = true;
    } else if (is_shared_rope(name)) {
      c.shared.push_back(i);
    } else {
      throw InputError("tensor " + name + " belongs to no object (embd, layer.N, output): not a llama-layout model");
    }
  }
  if (!c.embd) throw InputError("the model has no token_embd.weight");
  if (c.layers.empty()) throw InputError("the model has no blk.N.* tensors");
  const uint32_t n_layer = c.layers.rbegin()->first + 1;
  for (uint32_t l = 0; l < n_layer; ++l)
    if (!c.layers.count(l)) throw InputError("the model has no tensors for layer " + std::to_string(l));
  return c;
}

// An object of tensors `ts`: its bytes, its extents (adjacent tensors merged) and its chunks.
ModelObject make_object(const Manifest& m, std::string name, ObjectKind kind, int layer, std::vector<uint32_t> ts) {
  std::sort(ts.begin(), ts.end());
  ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
  ModelObject o;
  o.name = std::move(name);
  o.kind = kind;
  o.layer = layer;
  o.tensors = std::move(ts);
  std::set<ChunkId> cs;
  for (uint32_t t : o.tensors) {
    const auto& ti = m.tensors[t];
    o.bytes += ti.bytes;
    if (ti.bytes == 0) continue;
    const uint64_t b = ti.offset, e = ti.offset + ti.bytes;
    if (!o.extents.empty() && o.extents.back().second >= b)
      o.extents.back().second = std::max(o.extents.back().second, e);
    else
      o.extents.emplace_back(b, e);
    for (uint64_t c = b / m.chunk_size; c <= (e - 1) / m.chunk_size; ++c) cs.insert(static_cast<ChunkId>(c));
  }
  o.chunks.assign(cs.begin(), cs.end());
  return o;
}

// "blk.N.ffn_up_exps.weight" -> "up", "blk.N.ffn_gate_up_exps.bias" -> "gate_up.bias".
std::string expert_component(const std::string& name) {
  const size_t b = name.find('.', 4) + 1, x = name.find("_exps.");
  std::string stem = name.substr(b, x - b);
  if (stem.rfind("ffn_", 0) == 0) stem.erase(0, 4);
  const std::string suffix = name.substr(x + 6);
  return suffix == "weight" ? stem : stem + "." + suffix;
}

// An expert tensor must stack exactly the metadata's experts: InputError naming it otherwise.
void check_expert_tensor(const TensorInfo& t, uint32_t n_expert, const std::string& key) {
  if (n_expert == 0)
    throw InputError("expert tensor " + t.name + " is stacked per expert (*_exps), but the model's metadata gives no " +
                     "expert count (" + key + ")");
  if (t.shape.size() >= 2 && t.shape.back() != static_cast<int64_t>(n_expert))
    throw InputError("expert tensor " + t.name + " stacks " + std::to_string(t.shape.back()) +
                     " experts along its last dimension, but the metadata (" + key + ") says " + std::to_string(n_expert));
  if (t.bytes == 0 || t.bytes % n_expert != 0)
    throw InputError("expert tensor " + t.name + " (" + std::to_string(t.bytes) + " bytes) does not split into " +
                     std::to_string(n_expert) + " equal expert slices");
}

// The expert objects of layer object `obj`: expert e is slice e of each of its expert tensors.
void add_layer_experts(Manifest& m, uint32_t obj) {
  ModelObject& o = m.objects[obj];
  for (uint32_t e = 0; e < m.n_expert; ++e) {
    ExpertObject x;
    x.name = o.name + ".expert." + std::to_string(e);
    x.layer = o.layer;
    x.expert = e;
    x.step = obj;
    std::set<ChunkId> cs;
    for (uint32_t t : o.expert_tensors) {
      const TensorInfo& ti = m.tensors[t];
      const uint64_t slice = ti.bytes / m.n_expert, b = ti.offset + e * slice;
      x.slices.push_back({t, expert_component(ti.name), b, slice});
      x.bytes += slice;
      for (uint64_t c = b / m.chunk_size; c <= (b + slice - 1) / m.chunk_size; ++c) cs.insert(static_cast<ChunkId>(c));
    }
    x.chunks.assign(cs.begin(), cs.end());
    o.experts.push_back(static_cast<uint32_t>(m.experts.size()));
    m.experts.push_back(std::move(x));
  }
}

// Every layer's expert tensors (checked against the metadata), its dense tensors and its
// expert objects.
void build_experts(Manifest& m, uint32_t n_expert, const std::string& key) {
  m.n_expert = n_expert;
  for (uint32_t obj = 0; obj < m.objects.size(); ++obj) {
    ModelObject& o = m.objects[obj];
    if (o.kind != ObjectKind::Layer) continue;
    for (uint32_t t : o.tensors) {
      const TensorInfo& ti = m.tensors[t];
      if (!is_expert_tensor(ti.name)) continue;
      check_expert_tensor(ti, n_expert, key);
      o.expert_tensors.push_back(t);
    }
    if (o.expert_tensors.empty()) continue;
    for (uint32_t t : o.tensors)
      if (!std::binary_search(o.expert_tensors.begin(), o.expert_tensors.end(), t)) o.dense_tensors.push_back(t);
    add_layer_experts(m, obj);
  }
}

}  // namespace

Manifest build_manifest(std::vector<TensorInfo> tensors, uint64_t file_bytes, uint64_t data_offset,
                        uint64_t chunk_size, uint32_t n_expert, const std::string& expert_count_key) {
  if (chunk_size == 0) throw InputError("chunk size must be positive");
  if (tensors.empty()) throw InputError("the model has no tensors");
  Manifest m;
  m.file_bytes = file_bytes;
  m.data_offset = data_offset;
  m.chunk_size = chunk_size;
  const uint64_t n = (file_bytes + chunk_size - 1) / chunk_size;
  if (n > UINT32_MAX) throw InputError("too many chunks");
  m.chunks = static_cast<uint32_t>(n);
  check_tensor_extents(tensors, file_bytes, data_offset);
  m.tensors = std::move(tensors);
  Classified c = classify(m.tensors);
  m.n_layer = c.layers.rbegin()->first + 1;
  m.tied_output = !c.has_output_weight;
  m.objects.push_back(make_object(m, "embd", ObjectKind::Embd, -1, c.embd_tensors));
  for (uint32_t l = 0; l < m.n_layer; ++l) {
    auto ts = c.layers[l];
    ts.insert(ts.end(), c.shared.begin(), c.shared.end());
    m.objects.push_back(make_object(m, "layer." + std::to_string(l), ObjectKind::Layer, static_cast<int>(l), ts));
  }
  if (m.tied_output) c.output_tensors.push_back(*c.embd);
  if (c.output_tensors.empty()) throw InputError("the model has no output tensors (output_norm.*, output.*)");
  m.objects.push_back(make_object(m, "output", ObjectKind::Output, -1, c.output_tensors));
  m.membership.assign(m.objects.size(), std::vector<uint8_t>(m.tensors.size(), 0));
  for (uint32_t o = 0; o < m.objects.size(); ++o)
    for (uint32_t t : m.objects[o].tensors) m.membership[o][t] = 1;
  build_experts(m, n_expert, expert_count_key);
  return m;
}

std::vector<std::vector<ChunkId>> Manifest::step_chunks() const {
  std::vector<std::vector<ChunkId>> out;
  out.reserve(objects.size());
  for (const auto& o : objects) out.push_back(o.chunks);
  return out;
}

uint32_t Manifest::max_step_chunks() const {
  size_t m = 0;
  for (const auto& o : objects) m = std::max(m, o.chunks.size());
  return static_cast<uint32_t>(m);
}

std::vector<uint32_t> Manifest::objects_of_chunk(ChunkId c) const {
  std::vector<uint32_t> out;
  for (uint32_t o = 0; o < objects.size(); ++o)
    if (std::binary_search(objects[o].chunks.begin(), objects[o].chunks.end(), c)) out.push_back(o);
  return out;
}

std::optional<uint32_t> Manifest::tensor_at(uint64_t off) const {
  // Last tensor starting at or before off.
  auto it = std::upper_bound(tensors.begin(), tensors.end(), off,
                             [](uint64_t v, const TensorInfo& t) { return v < t.offset; });
  while (it != tensors.begin()) {
    --it;
    if (off < it->offset + it->bytes) return static_cast<uint32_t>(it - tensors.begin());
    if (it->bytes > 0) break;  // zero-size tensors share offsets with their neighbours
  }
  return std::nullopt;
}

bool Manifest::object_has_tensor(uint32_t obj, uint32_t t) const {
  return obj < membership.size() && t < membership[obj].size() && membership[obj][t];
}

std::optional<uint32_t> Manifest::layer_object(int layer) const {
  for (uint32_t o = 0; o < objects.size(); ++o)
    if (objects[o].kind == ObjectKind::Layer && objects[o].layer == layer) return o;
  return std::nullopt;
}

std::optional<std::vector<ChunkId>> Manifest::routed_chunks(uint32_t obj, const std::vector<int32_t>& picked) const {
  if (obj >= objects.size() || objects[obj].experts.empty()) return std::nullopt;
  const ModelObject& o = objects[obj];
  for (int32_t e : picked)
    if (e < 0 || static_cast<uint32_t>(e) >= n_expert) return std::nullopt;
  std::set<ChunkId> cs;
  for (uint32_t t : o.dense_tensors) {
    const TensorInfo& ti = tensors[t];
    if (ti.bytes == 0) continue;
    for (uint64_t c = ti.offset / chunk_size; c <= (ti.offset + ti.bytes - 1) / chunk_size; ++c)
      cs.insert(static_cast<ChunkId>(c));
  }
  for (int32_t e : picked) {
    const auto& x = experts[o.experts[static_cast<size_t>(e)]].chunks;
    cs.insert(x.begin(), x.end());
  }
  return std::vector<ChunkId>(cs.begin(), cs.end());
}

std::optional<uint32_t> Manifest::expert_object(int layer, int32_t expert) const {
  const auto l = layer_object(layer);
  if (!l || expert < 0 || static_cast<size_t>(expert) >= objects[*l].experts.size()) return std::nullopt;
  return objects[*l].experts[static_cast<size_t>(expert)];
}

namespace {

nlohmann::json expert_json(const Manifest& m, const ExpertObject& x) {
  nlohmann::json sl = nlohmann::json::array();
  for (const auto& s : x.slices)
    sl.push_back({{"tensor", m.tensors[s.tensor].name}, {"component", s.component}, {"offset", s.offset}, {"bytes", s.bytes}});
  return {{"name", x.name}, {"kind", "expert"}, {"layer", x.layer}, {"expert", x.expert},
          {"step", m.objects[x.step].name}, {"bytes", x.bytes}, {"slices", sl}, {"chunks", x.chunks}};
}

// A MoE layer's dense object and the names of its expert objects (null for other objects).
nlohmann::json dense_json(const Manifest& m, const ModelObject& o) {
  if (o.experts.empty()) return nullptr;
  nlohmann::json ts = nlohmann::json::array();
  uint64_t bytes = 0;
  for (uint32_t t : o.dense_tensors) {
    ts.push_back(m.tensors[t].name);
    bytes += m.tensors[t].bytes;
  }
  return {{"name", o.name + ".dense"}, {"tensors", ts}, {"bytes", bytes}};
}

}  // namespace

nlohmann::json Manifest::to_json() const {
  nlohmann::json objs = nlohmann::json::array();
  for (const auto& o : objects) {
    nlohmann::json ts = nlohmann::json::array();
    for (uint32_t t : o.tensors)
      ts.push_back({{"name", tensors[t].name}, {"type", tensors[t].type}, {"offset", tensors[t].offset},
                    {"bytes", tensors[t].bytes}, {"shape", tensors[t].shape}});
    nlohmann::json ex = nlohmann::json::array();
    for (const auto& [b, e] : o.extents) ex.push_back({b, e - b});
    nlohmann::json xs = nlohmann::json::array();
    for (uint32_t t : o.expert_tensors) xs.push_back(tensors[t].name);
    objs.push_back({{"name", o.name},
                    {"kind", to_string(o.kind)},
                    {"expert_tensors", xs},
                    {"dense", dense_json(*this, o)},
                    {"experts", [&] {
                       nlohmann::json a = nlohmann::json::array();
                       for (uint32_t x : o.experts) a.push_back(experts[x].name);
                       return a;
                     }()},
                    {"layer", o.layer >= 0 ? nlohmann::json(o.layer) : nlohmann::json(nullptr)},
                    {"tensors", ts},
                    {"bytes", o.bytes},
                    {"extents", ex},
                    {"first_chunk", o.chunks.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.chunks.front())},
                    {"last_chunk", o.chunks.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.chunks.back())},
                    {"chunks", o.chunks}});
  }
  nlohmann::json order = nlohmann::json::array();
  for (const auto& o : objects) order.push_back(o.name);
  nlohmann::json xs = nlohmann::json::array();
  for (const auto& x : experts) xs.push_back(expert_json(*this, x));
  return {{"schema_version", 1},
          {"file_bytes", file_bytes},
          {"data_offset", data_offset},
          {"chunk_size", chunk_size},
          {"chunks", chunks},
          {"n_layer", n_layer},
          {"tied_output", tied_output},
          {"n_expert", n_expert},
          {"max_step_chunks", max_step_chunks()},
          {"objects", objs},
          {"experts", xs},
          {"step_order", order}};
}

std::optional<std::vector<ChunkId>> row_chunks(uint64_t tensor_offset, uint64_t tensor_bytes, uint64_t row_bytes,
                                               const std::vector<int32_t>& rows, uint64_t chunk_size) {
  if (row_bytes == 0 || chunk_size == 0) return std::nullopt;
  std::vector<ChunkId> out;
  out.reserve(rows.size() * 2);
  for (int32_t r : rows) {
    if (r < 0) return std::nullopt;
    const uint64_t b = static_cast<uint64_t>(r) * row_bytes;
    if (b + row_bytes > tensor_bytes) return std::nullopt;
    const uint64_t first = (tensor_offset + b) / chunk_size, last = (tensor_offset + b + row_bytes - 1) / chunk_size;
    for (uint64_t c = first; c <= last; ++c) out.push_back(static_cast<ChunkId>(c));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<std::string> startup_audit_error(const SignalAudit& audit, const Manifest& m,
                                               uint32_t passes_checked) {
  const auto zero = audit.zero_signal_chunks();
  if (zero.empty()) return std::nullopt;
  const ChunkId c = zero.front();
  std::string objs;
  for (uint32_t o : m.objects_of_chunk(c)) objs += (objs.empty() ? "" : ", ") + m.objects[o].name;
  return "signal audit: declared chunk " + std::to_string(c) + " (object " + (objs.empty() ? "?" : objs) +
         ") received no consumption signal in the first " + std::to_string(passes_checked) +
         " pass(es) (prefill + decode); " + std::to_string(zero.size()) + " declared chunk(s) unsignalled";
}

}  // namespace resid
