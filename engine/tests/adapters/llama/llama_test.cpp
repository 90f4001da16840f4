// The llama adapter end to end, on tiny llama-architecture GGUFs written at test time by the
// pipeline's generator (the llama_test_models ctest fixture, tests/make_test_models.py):
// object discovery from the GGUF, and `residctl generate` through every arm at a budget below
// the model's size, byte-identical tokens and logits across arms, consistent traces.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "adapters/llama/adapter.hpp"
#include "adapters/llama/objects.hpp"
#include "core/errors.hpp"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"
#include "pager/pager.hpp"
#include "util/test_util.hpp"

using namespace resid;

namespace {

constexpr uint64_t kChunk = 64 << 10;

using test::count_lines;
using test::exists;
using test::load_json;

// The architecture matrix (engine/CMakeLists.txt, RESID_ARCH_MATRIX): model names
// <arch>-<variant>-<tied|untied>-<type>, written by the llama_test_models fixture.
std::vector<std::string> arch_matrix() {
  std::vector<std::string> out;
  std::stringstream in(RESID_ARCH_MATRIX);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) out.push_back(name);
  return out;
}

// Of the matrix, the first model of each family in a type llama.cpp repacks on x86 (the
// tight-budget cells: oversize steps, per-thread pins, on every family's graph).
std::vector<std::string> arch_matrix_one_per_family() {
  std::vector<std::string> out;
  std::set<std::string> families;
  for (const auto& name : arch_matrix()) {
    const std::string type = name.substr(name.rfind('-') + 1);
    if ((type == "q4_0" || type == "q4_k_m" || type == "iq4_nl") && families.insert(name.substr(0, name.find('-'))).second)
      out.push_back(name);
  }
  return out;
}

// "dense" and "moe" are the tiny llama models; any other name is a matrix model.
std::string model_path(const std::string& name) {
  return std::string(RESID_TEST_MODELS) + (name == "dense" || name == "moe" ? "/tiny-" + name : "/" + name) + ".gguf";
}

bool is_moe(const std::string& name) { return name == "moe" || name.find("-moe-") != std::string::npos; }

// The test model, or the reason to skip.
std::string model_or_skip_reason(const std::string& variant, std::string* reason) {
  const std::string p = model_path(variant);
  if (exists(p)) return p;
  *reason = std::string(RESID_PYTHON).empty()
                ? "no test model: configure with -DRESID_PYTHON=<python with the residency package>"
                : "no test model at " + p + " (run the llama_test_models ctest fixture)";
  return {};
}

#define MODEL_OR_SKIP(var, variant)               \
  std::string var;                                \
  do {                                            \
    std::string why_;                             \
    var = model_or_skip_reason(variant, &why_);   \
    if (var.empty()) GTEST_SKIP() << why_;        \
  } while (0)


struct Rec {
  uint32_t step, chunk;
  uint8_t kind, flags;
};

std::vector<Rec> read_trace(const std::string& path, uint64_t* chunk_size, uint64_t* chunks) {
  const std::string raw = test::slurp(path);
  std::vector<Rec> out;
  if (raw.size() < 32 || raw.compare(0, 8, "RSTRACE1") != 0) return out;
  std::memcpy(chunk_size, raw.data() + 16, 8);
  std::memcpy(chunks, raw.data() + 24, 8);
  for (size_t o = 32; o + 16 <= raw.size(); o += 16) {
    Rec r{};
    std::memcpy(&r.step, raw.data() + o, 4);
    std::memcpy(&r.chunk, raw.data() + o + 4, 4);
    r.kind = static_cast<uint8_t>(raw[o + 8]);
    r.flags = static_cast<uint8_t>(raw[o + 9]);
    out.push_back(r);
  }
  return out;
}

Manifest manifest_of(const std::string& model, uint64_t chunk = kChunk) {
  const GgufSummary g = read_gguf(model);
  return build_manifest(g.tensors, g.file_bytes, g.data_offset, chunk, g.n_expert);
}

// token_embd.weight's file offset and row size (its type and shape, from the GGUF's tensor
// table through gguf/ggml directly, independently of the adapter).
std::pair<uint64_t, uint64_t> embd_offset_and_row(const std::string& model) {
  ggml_context* meta = nullptr;
  gguf_init_params p{};
  p.no_alloc = true;
  p.ctx = &meta;
  gguf_context* g = gguf_init_from_file(model.c_str(), p);
  if (!g) return {0, 0};
  const int64_t id = gguf_find_tensor(g, "token_embd.weight");
  const uint64_t off = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id);
  const ggml_tensor* t = ggml_get_tensor(meta, "token_embd.weight");
  const uint64_t row = ggml_row_size(t->type, t->ne[0]);
  gguf_free(g);
  ggml_free(meta);
  return {off, row};
}

// The chunks holding the rows of `ids` (computed here, not with the adapter's helper).
std::vector<uint32_t> rows_chunks(const std::vector<int>& ids, uint64_t off, uint64_t row, uint64_t chunk) {
  std::set<uint32_t> cs;
  for (int id : ids) {
    const uint64_t b = off + static_cast<uint64_t>(id) * row;
    for (uint64_t c = b / chunk; c <= (b + row - 1) / chunk; ++c) cs.insert(static_cast<uint32_t>(c));
  }
  return {cs.begin(), cs.end()};
}

// Per (pass, layer) of a MoE model, the chunks the layer's step reads: its tensors whole,
// except the expert tensors (*_exps.*: n_expert equal slices stacked), of which only the
// slices of the experts routes.jsonl lists for that pass and layer. Computed here from the
// GGUF's tensor table (gguf directly) and the routes, independently of the adapter.
using RoutedSteps = std::map<std::pair<uint64_t, int>, std::vector<uint32_t>>;
RoutedSteps routed_step_chunks(const std::string& model, const std::string& routes_path, uint64_t chunk) {
  RoutedSteps out;
  if (!exists(routes_path)) return out;
  gguf_init_params p{};
  p.no_alloc = true;
  gguf_context* g = gguf_init_from_file(model.c_str(), p);
  if (!g) return out;
  const std::string arch = gguf_get_val_str(g, gguf_find_key(g, "general.architecture"));
  const uint64_t n_expert = gguf_get_val_u32(g, gguf_find_key(g, (arch + ".expert_count").c_str()));
  std::istringstream in(test::slurp(routes_path));
  for (std::string line; std::getline(in, line);) {
    const auto rj = nlohmann::json::parse(line);
    const int layer = rj["layer"].get<int>();
    std::set<uint64_t> experts;
    for (const auto& row : rj["experts"])
      for (const auto& e : row) experts.insert(e.get<uint64_t>());
    const std::string prefix = "blk." + std::to_string(layer) + ".";
    std::set<uint32_t> cs;
    auto add = [&](uint64_t b, uint64_t e) {
      for (uint64_t c = b / chunk; c <= (e - 1) / chunk; ++c) cs.insert(static_cast<uint32_t>(c));
    };
    for (int64_t t = 0; t < gguf_get_n_tensors(g); ++t) {
      const std::string name = gguf_get_tensor_name(g, t);
      if (name.rfind(prefix, 0) != 0 && name.rfind("rope_", 0) != 0) continue;
      const uint64_t off = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, t), bytes = gguf_get_tensor_size(g, t);
      if (name.find("_exps.") == std::string::npos) {
        add(off, off + bytes);
        continue;
      }
      for (uint64_t e : experts) add(off + e * (bytes / n_expert), off + (e + 1) * (bytes / n_expert));
    }
    out[{rj["pass"].get<uint64_t>(), layer}] = {cs.begin(), cs.end()};
  }
  gguf_free(g);
  return out;
}

// Every access record of the trace by step; the embd steps (step % S == 0) must list exactly
// the chunks of the rows of the pass's batch tokens (the prompt in pass 0, then the token
// decoded by the previous pass), a MoE layer's step the chunks of its routed experts (and its
// other tensors), every other step its object's chunks.
void expect_embd_accesses_are_the_batch_rows(const std::map<uint32_t, std::vector<uint32_t>>& acc, const Manifest& m,
                                             const nlohmann::json& tokens_json, const std::string& model,
                                             const std::string& what, const RoutedSteps& routed = {}) {
  const auto [off, row] = embd_offset_and_row(model);
  ASSERT_GT(row, 0u);
  const uint64_t S = m.objects.size();
  const auto prompt = tokens_json["prompt_tokens"].get<std::vector<int>>();
  const auto toks = tokens_json["tokens"].get<std::vector<int>>();
  uint64_t embd_steps = 0;
  for (const auto& [step, chunks] : acc) {
    const uint64_t pass = step / S;
    if (step % S != 0) {
      const auto& o = m.objects[step % S];
      const auto r = routed.find({pass, o.layer});
      EXPECT_EQ(chunks, r != routed.end() ? r->second : o.chunks) << what << " step " << step;
      continue;
    }
    ++embd_steps;
    const std::vector<int> batch = pass == 0 ? prompt : std::vector<int>{toks.at(pass - 1)};
    EXPECT_EQ(chunks, rows_chunks(batch, off, row, m.chunk_size)) << what << " embd step of pass " << pass;
    // A decode pass reads one row: at most two chunks, far fewer than the whole embedding.
    if (pass > 0) {
      EXPECT_LE(chunks.size(), 2u) << what;
    }
  }
  EXPECT_EQ(embd_steps, toks.size()) << what;
}

}  // namespace

TEST(LlamaAdapter, ObjectsFromTheGgufFile) {
  MODEL_OR_SKIP(model, "dense");
  const GgufSummary g = read_gguf(model);
  EXPECT_EQ(g.architecture, "llama");
  EXPECT_EQ(g.file_bytes, std::filesystem::file_size(model));
  EXPECT_GT(g.data_offset, 0u);
  const Manifest m = build_manifest(g.tensors, g.file_bytes, g.data_offset, kChunk);
  ASSERT_EQ(m.n_layer, 3u);
  ASSERT_EQ(m.objects.size(), 5u);
  const std::vector<std::string> order = {"embd", "layer.0", "layer.1", "layer.2", "output"};
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(m.objects[i].name, order[i]);
  EXPECT_FALSE(m.tied_output);  // the generator writes output.weight
  // Every tensor in exactly one object; the layer objects hold exactly their blk.N tensors.
  std::map<std::string, int> seen;
  for (const auto& o : m.objects)
    for (uint32_t t : o.tensors) {
      ++seen[m.tensors[t].name];
      if (o.kind == ObjectKind::Layer) {
        EXPECT_EQ(m.tensors[t].name.rfind("blk." + std::to_string(o.layer) + ".", 0), 0u) << m.tensors[t].name;
      }
    }
  EXPECT_EQ(seen.size(), g.tensors.size());
  for (const auto& [n, k] : seen) EXPECT_EQ(k, 1) << n;
  // Chunk ranges cover the extents, and the extents every tensor byte.
  uint64_t covered = 0;
  for (const auto& o : m.objects) {
    ASSERT_FALSE(o.chunks.empty()) << o.name;
    for (auto [b, e] : o.extents) {
      EXPECT_LE(o.chunks.front() * kChunk, b) << o.name;
      EXPECT_GE((o.chunks.back() + 1) * kChunk, e) << o.name;
      for (uint64_t c = b / kChunk; c <= (e - 1) / kChunk; ++c)
        EXPECT_TRUE(std::binary_search(o.chunks.begin(), o.chunks.end(), static_cast<ChunkId>(c))) << o.name;
      covered += e - b;
    }
  }
  uint64_t tensor_bytes = 0;
  for (const auto& t : m.tensors) tensor_bytes += t.bytes;
  EXPECT_GE(covered, tensor_bytes);
  EXPECT_EQ(m.tensors.front().name, "token_embd.weight");
  EXPECT_LE(m.tensors.back().offset + m.tensors.back().bytes, g.file_bytes);
}

namespace {

struct Recorder final : StepListener {
  std::vector<std::string> events;
  std::optional<std::vector<uint32_t>> embd_rows;
  void pass_started(std::optional<std::vector<uint32_t>> rows) override {
    events.push_back("pass");
    embd_rows = std::move(rows);
  }
  void object_entered(uint32_t o) override { events.push_back("enter " + std::to_string(o)); }
  void routes(int layer, std::vector<std::vector<int32_t>> experts) override {
    std::string e = "routes " + std::to_string(layer) + ":";
    for (auto& r : experts)
      for (int32_t x : r) {
        e += ' ';
        e += std::to_string(x);
      }
    events.push_back(e);
  }
};

}  // namespace

TEST(EvalObserver, BoundariesAndTheWeightReadAudit) {
  // A hand-made graph, node by node, the way the scheduler calls the eval callback: ask=true
  // for every node, ask=false after each wanted one.
  std::vector<TensorInfo> ts;
  uint64_t off = 4096;
  for (const char* n : {"token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                        "blk.1.attn_norm.weight", "blk.1.attn_q.weight", "output_norm.weight", "output.weight"}) {
    ts.push_back({n, "F32", off, 8192, {}});
    off += 8192;
  }
  const Manifest m = build_manifest(ts, off, 4096, 4096);
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  // Page aligned, as a mapping is (ggml wants buffer pointers TENSOR_ALIGNMENT-aligned).
  const size_t map_len = (off + 4095) / 4096 * 4096;
  std::unique_ptr<std::byte, Free> map_mem(static_cast<std::byte*>(std::aligned_alloc(4096, map_len)));
  struct Span {
    std::byte* p;
    size_t n;
    std::byte* data() const { return p; }
    size_t size() const { return n; }
  } mapping{map_mem.get(), map_len};
  ggml_init_params ip{64 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(ip);
  ggml_backend_buffer_t wbuf = ggml_backend_cpu_buffer_from_ptr(mapping.data(), mapping.size());
  ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
  // Another buffer over the same addresses: memory reused in a hole of the mapping (the KV
  // cache in a range llama.cpp unmapped) is not a weight.
  ggml_backend_buffer_t kvbuf = ggml_backend_cpu_buffer_from_ptr(mapping.data(), 4096);
  auto weight = [&](size_t i) {
    ggml_tensor* w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2048);
    ggml_set_name(w, m.tensors[i].name.c_str());
    w->data = mapping.data() + m.tensors[i].offset;
    w->buffer = wbuf;
    return w;
  };
  auto node = [&](const char* name, ggml_tensor* a = nullptr, ggml_tensor* b = nullptr) {
    ggml_tensor* n = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_set_name(n, name);
    n->src[0] = a;
    n->src[1] = b;
    return n;
  };
  ggml_tensor* kv = ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 16);
  kv->data = mapping.data() + 100;
  kv->buffer = kvbuf;
  int32_t topk[2][4] = {{3, 1, 9, 9}, {0, 2, 9, 9}};  // [n_tokens=2][n_expert=4], 2 used: a view
  ggml_tensor* sel = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 2);
  ggml_set_name(sel, "ffn_moe_topk-1");
  sel->data = topk;
  sel->nb[1] = 4 * sizeof(int32_t);

  Recorder rec;
  EvalObserver obs(m, rec);
  obs.set_mapping(reinterpret_cast<uintptr_t>(mapping.data()), mapping.size());
  auto ask = [&](ggml_tensor* t) { return EvalObserver::callback(t, true, &obs); };
  auto done = [&](ggml_tensor* t) { EXPECT_TRUE(EvalObserver::callback(t, false, &obs)); };

  // embd = GET_ROWS(token_embd viewed as 128 rows of 16 floats = 64 bytes, token ids): the
  // rows the ids select are what the step reads. token_embd is at file offset 4096, chunks
  // are 4096 bytes: rows 0 and 5 lie in chunk 1, row 127 ([12224, 12288)) in chunk 2.
  ggml_tensor* emb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 128);
  ggml_set_name(emb, "token_embd.weight");
  emb->data = mapping.data() + m.tensors[0].offset;
  emb->buffer = wbuf;
  int32_t ids_v[3] = {127, 0, 5};
  ggml_tensor* ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
  ids->data = ids_v;
  ggml_tensor* embd = ggml_get_rows(ctx, emb, ids);
  ggml_set_name(embd, "embd");
  // One pass of the graph: each node with whether the pass wants it (a discovery pass wants
  // every node, a later one only the learned boundaries). `layer1_q` is the weight the
  // layer-1 Qcur node reads (its own, or layer 0's: a foreign read).
  struct Step {
    ggml_tensor* t;
    bool want;
  };
  auto graph = [&](bool discovery, ggml_tensor* layer1_q) {
    return std::vector<Step>{
        {embd, discovery},
        {node("norm-0"), true},  // learned: the node before layer 0's first weight read
        {node("attn_norm-0", nullptr, weight(1)), discovery},
        {node("Qcur-0", weight(2)), discovery},
        {node("cache_v_l0 (view)", kv), discovery},  // not a weight read
        {node("norm-0"), discovery},                 // the second RMS_NORM of layer 0
        {node("norm-1"), true},
        {node("attn_norm-1", nullptr, weight(3)), discovery},
        {sel, true},
        {node("Qcur-1", layer1_q), discovery},
        {node("norm"), true},
        {node("result_norm", nullptr, weight(5)), discovery},
        {node("result_output", weight(6)), discovery},
    };
  };
  auto run = [&](const std::vector<Step>& steps) {
    for (const Step& s : steps) {
      EXPECT_EQ(ask(s.t), s.want) << s.t->name;
      if (s.want) done(s.t);
    }
    obs.end_pass();
    EXPECT_EQ(obs.current(), -1);
  };
  const std::vector<std::string> entered = {"pass", "enter 1", "enter 2", "routes 1: 3 1 0 2", "enter 3"};

  // Pass 1 discovers: every node is wanted; each object is entered at its first weight read.
  run(graph(true, weight(4)));
  ASSERT_TRUE(rec.embd_rows.has_value());
  EXPECT_EQ(*rec.embd_rows, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(rec.events, entered);
  EXPECT_EQ(obs.stats().discovery_passes, 1u);
  EXPECT_EQ(obs.stats().foreign_reads, 0u);
  const auto plan = obs.plans_json();
  ASSERT_EQ(plan["shapes"].size(), 1u);
  EXPECT_EQ(plan["shapes"][0]["tokens"], 3);
  const auto& bs = plan["shapes"][0]["boundaries"];
  ASSERT_EQ(bs.size(), 3u);
  EXPECT_EQ(bs[0]["node"], "norm-0");
  EXPECT_EQ(bs[0]["occurrence"], 1);
  EXPECT_EQ(bs[2]["node"], "norm");
  EXPECT_EQ(bs[2]["object"], m.objects[3].name);

  // Pass 2 (same shape) wants only the boundaries, and enters each at its ask=false call;
  // a read of layer 0's weight while layer 1 is current is a foreign read.
  rec.events.clear();
  run(graph(false, weight(2)));
  EXPECT_EQ(rec.events, entered);
  EXPECT_EQ(obs.stats().discovery_passes, 1u);
  EXPECT_EQ(obs.stats().foreign_reads, 1u);
  EXPECT_NE(obs.stats().first_violation.find("blk.0.attn_q.weight"), std::string::npos) << obs.stats().first_violation;

  // A pass whose embd node cannot be read (no ids): the whole object, counted, and a new
  // graph shape, so discovered again.
  rec.events.clear();
  EXPECT_TRUE(ask(node("embd", weight(0))));
  EXPECT_FALSE(rec.embd_rows.has_value());
  obs.end_pass();
  const auto& st = obs.stats();
  EXPECT_EQ(st.embd_rows_read, 2u);
  EXPECT_EQ(st.embd_rows_unread, 1u);
  EXPECT_EQ(st.discovery_passes, 2u);
  EXPECT_EQ(st.weight_reads, 2u * 7u + 1u);
  EXPECT_EQ(st.outside_reads, 0u);
  EXPECT_EQ(st.boundaries, 2u * 4u + 1u);

  // A plan learned by one run is reused by another (no discovery); one naming an object the
  // model lacks is refused.
  Recorder rec2;
  EvalObserver obs2(m, rec2);
  obs2.set_mapping(reinterpret_cast<uintptr_t>(mapping.data()), mapping.size());
  obs2.load_plans(plan);
  EXPECT_FALSE(EvalObserver::callback(embd, true, &obs2));
  EXPECT_EQ(obs2.stats().discovery_passes, 0u);
  auto bad = plan;
  bad["shapes"][0]["boundaries"][0]["object"] = "blk.99";
  EvalObserver obs3(m, rec2);
  EXPECT_THROW(obs3.load_plans(bad), InputError);
  ggml_backend_buffer_free(kvbuf);
  ggml_backend_buffer_free(wbuf);
  ggml_free(ctx);
}

namespace {

// D/OPT of the declared arm's run: its misses over Belady's MIN on its own reference trace
// at its budget, computed by the pipeline's code (residency.core.trace, residency.analysis.belady). D can
// never beat the offline optimum, and a trace with no miss would make the ratio meaningless.
void expect_declared_over_opt_at_least_one(const std::string& run, const std::string& what) {
  if (std::string(RESID_PYTHON).empty()) {
    ADD_FAILURE() << "D/OPT needs RESID_PYTHON (the pipeline's Belady code)";
    return;
  }
  const auto j = load_json(run + "/run.json");
  const uint64_t capacity = j["budget"]["budget_chunks"].get<uint64_t>();
  const std::string opt_json = run + "/opt.json";
  const auto r = test::spawn_capture(RESID_PYTHON, {RESID_OPT_SCRIPT, run + "/trace.bin", std::to_string(capacity)},
                                     run + "/opt.stderr", opt_json);
  ASSERT_EQ(r.status, 0) << what << ": " << r.err;
  const auto o = load_json(opt_json);
  const uint64_t misses = j["counters"]["misses"].get<uint64_t>(), opt = o["opt_misses"].get<uint64_t>();
  EXPECT_EQ(o["trace_misses"].get<uint64_t>(), misses) << what;
  EXPECT_EQ(o["accesses"].get<uint64_t>(), j["counters"]["accesses"].get<uint64_t>()) << what;
  ASSERT_GT(opt, 0u) << what;
  const double ratio = static_cast<double>(misses) / static_cast<double>(opt);
  EXPECT_TRUE(std::isfinite(ratio)) << what;
  EXPECT_GE(ratio, 1.0) << what << ": D " << misses << " misses, OPT " << opt;
  ::testing::Test::RecordProperty("d_over_opt", std::to_string(ratio));
  std::printf("D/OPT %s: %llu / %llu = %.3f at %llu chunks\n", what.c_str(), static_cast<unsigned long long>(misses),
              static_cast<unsigned long long>(opt), ratio, static_cast<unsigned long long>(capacity));
}

}  // namespace

class Generate : public ::testing::TestWithParam<std::string> {};

TEST_P(Generate, EveryArmIsExactAtABudgetBelowTheModel) {
  MODEL_OR_SKIP(model, GetParam());
  test::TempDir dir;
  const Manifest m = manifest_of(model);
  const uint64_t max_step = m.max_step_chunks();
  const uint32_t depth = 2;
  // Window (one chunk) + the region's page tables paid from the budget.
  const uint64_t own = kChunk + Pager::page_table_reserve(static_cast<uint64_t>(m.chunks) * kChunk);
  // The largest object held whole (no oversize step), and at least the hard minimum.
  const uint64_t budget_chunks = std::max<uint64_t>(max_step + depth, Pager::kPinsPerThread * 2 + 2 + depth);
  ASSERT_LT(budget_chunks, m.chunks) << "the test model is too small to page";
  const uint64_t budget = budget_chunks * kChunk + own;
  const uint32_t tokens = 6;
  const std::string errf = dir.file("stderr.txt");

  std::map<std::string, std::string> tokens_of, logits_of;
  std::string declared_out;
  // Every pager arm is compared with kernel-mmap: without userfaultfd there is nothing to compare.
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  // pager-declared:tensor is arm D with the tensor-granular consumption signal.
  for (std::string label : {"kernel-mmap", "pager-lru", "pager-declared", "pager-declared:tensor", "pager-prefetch",
                            "pager-zero"}) {
    const std::string arm = label.substr(0, label.find(':'));
    const bool tensor = label != arm;
    const std::string out = dir.file("run-" + (tensor ? arm + "-tensor" : arm));
    std::vector<std::string> args = {"generate", "--model", model, "--out", out, "--arm", arm,
                                     "--prompt", "the quick brown fox", "--tokens", std::to_string(tokens),
                                     "--threads", "2", "--ctx", "64", "--chunk-size", std::to_string(kChunk),
                                     "--watchdog-s", "60", "--eager-reconcile"};
    if (arm != "kernel-mmap") {
      args.insert(args.end(), {"--budget-bytes", std::to_string(budget), "--prefetch-depth", std::to_string(depth)});
    }
    if (tensor) args.insert(args.end(), {"--consumption", "tensor"});
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, errf);
    ASSERT_EQ(r.status, 0) << label << ": " << r.err;
    for (const char* f : {"run.json", "trace.bin", "tokens.json", "logits.f32", "logits.sha256", "objects.json",
                          "response.txt"})
      ASSERT_TRUE(exists(out + "/" + f)) << arm << " " << f;
    EXPECT_EQ(exists(out + "/routes.jsonl"), is_moe(GetParam())) << arm;

    const auto j = load_json(out + "/run.json");
    EXPECT_EQ(j["status"], "ok") << arm;
    EXPECT_EQ(j["subcommand"], "generate");
    EXPECT_EQ(j["arm"], arm);
    EXPECT_EQ(j["llama"]["repack_disabled"], true);
    EXPECT_EQ(j["llama"]["commit"].get<std::string>().size(), 40u);
    EXPECT_EQ(j["model"]["n_layer"], m.n_layer);
    const size_t dash = GetParam().find('-');
    EXPECT_EQ(j["model"]["architecture"], dash == std::string::npos ? "llama" : GetParam().substr(0, dash)) << arm;
    EXPECT_EQ(j["model"]["tied_output"], GetParam().find("-tied-") != std::string::npos) << arm;
    EXPECT_EQ(j["objects"], m.objects.size());
    EXPECT_EQ(j["steps_per_pass"], m.objects.size());
    const auto& gen = j["generation"];
    EXPECT_EQ(gen["tokens"], tokens);
    EXPECT_EQ(gen["passes"], tokens);  // the prefill + tokens - 1 decode passes
    EXPECT_GT(gen["tokens_per_s"].get<double>(), 0);
    // One latency per decode token; quantiles ordered.
    const auto& tl = gen["token_latency_ns"];
    EXPECT_EQ(tl["count"], tokens - 1) << arm;
    EXPECT_GT(tl["p50"].get<uint64_t>(), 0u) << arm;
    EXPECT_LE(tl["p50"].get<uint64_t>(), tl["p99"].get<uint64_t>()) << arm;
    EXPECT_LE(tl["p99"].get<uint64_t>(), tl["max"].get<uint64_t>()) << arm;
    // The demand faults are the exposed waits that read their own chunk: all of them without
    // prefetch, fewer with it (a fault on a prefetch in flight is a wait, not a demand fault).
    const auto& lat = j["latency_ns"];
    if (arm != "kernel-mmap") {
      const uint64_t waits = lat["fault_count"], demand = lat["demand_fault_count"];
      EXPECT_GT(demand, 0u) << arm;
      if (arm == "pager-prefetch")
        EXPECT_LE(demand, waits) << arm;
      else
        EXPECT_EQ(demand, waits) << arm;
      EXPECT_LE(lat["demand_fault_p50"].get<uint64_t>(), lat["demand_fault_p99"].get<uint64_t>()) << arm;
    }
    const auto& sa = j["signal_audit"];
    EXPECT_EQ(sa["foreign_reads"], 0) << sa["first_violation"];
    EXPECT_EQ(sa["outside_reads"], 0) << sa["first_violation"];
    EXPECT_GT(sa["weight_reads"].get<uint64_t>(), 0u);
    EXPECT_EQ(sa["out_of_order"], 0);
    EXPECT_TRUE(sa["zero_signal_chunks"].empty());
    EXPECT_EQ(sa["consumption"], tensor ? "tensor" : "object");
    EXPECT_EQ(sa["reads_after_release"], 0) << sa["first_violation"];
    if (!tensor) {
      EXPECT_EQ(sa["releases"], 0);
    }
    const uint64_t S = m.objects.size();
    const auto& c = j["counters"];
    EXPECT_EQ(c["steps"], tokens * S);
    EXPECT_EQ(c["signals"], tokens * S);
    EXPECT_EQ(c["stray_demand_fills"], 0) << arm;
    EXPECT_EQ(c["reconcile_mismatches"], 0) << arm;
    const auto& mp = j["mapping"];
    if (arm == "kernel-mmap") {
      EXPECT_TRUE(j["policy"].is_null());
      EXPECT_EQ(mp["mode"], "observe");
      EXPECT_EQ(mp["interposed"], false);
    } else {
      EXPECT_EQ(mp["mode"], "substitute");
      EXPECT_EQ(mp["interposed"], true);
      EXPECT_EQ(mp["mmap_calls"], 1);
      EXPECT_TRUE(mp["refused"].is_null());
      EXPECT_EQ(j["budget"]["budget_chunks"], budget_chunks);
      EXPECT_LE(c["max_resident_chunks"].get<uint64_t>(), budget_chunks) << arm;
      EXPECT_GT(c["demand_fills"].get<uint64_t>(), 0u);
      EXPECT_GT(c["reconcile_checks"].get<uint64_t>(), 0u);
    }
    if (arm == "pager-prefetch") {
      EXPECT_GT(c["prefetch_fills"].get<uint64_t>(), 0u);
    }

    // The trace: one access record per chunk of each object step, in the declared order.
    uint64_t cs = 0, nchunks = 0;
    const auto recs = read_trace(out + "/trace.bin", &cs, &nchunks);
    EXPECT_EQ(cs, kChunk);
    EXPECT_EQ(nchunks, m.chunks);
    EXPECT_EQ(recs.size(), j["trace"]["records"].get<size_t>());
    std::map<uint32_t, std::vector<uint32_t>> acc;
    std::map<uint32_t, std::set<uint32_t>> fills;
    uint64_t misses = 0;
    for (const auto& rec : recs)
      if (rec.kind == 2) fills[rec.step].insert(rec.chunk);
    for (const auto& rec : recs) {
      if (rec.kind != 1) continue;
      acc[rec.step].push_back(rec.chunk);
      misses += rec.flags & 1;
      // A miss is a demand fill of that chunk in that step (pager arms).
      if (arm != "kernel-mmap") {
        EXPECT_EQ((rec.flags & 1) != 0, fills[rec.step].count(rec.chunk) != 0) << arm << " step " << rec.step;
      }
    }
    EXPECT_EQ(misses, c["misses"].get<uint64_t>());
    ASSERT_EQ(acc.size(), tokens * S) << arm;
    const auto objs = load_json(out + "/objects.json");
    EXPECT_EQ(objs["objects"].size(), S);
    EXPECT_EQ(objs["objects"][0]["name"], "embd");

    const auto tj = load_json(out + "/tokens.json");
    const auto routed = routed_step_chunks(model, out + "/routes.jsonl", kChunk);
    EXPECT_EQ(routed.size(), is_moe(GetParam()) ? tokens * m.n_layer : 0u) << arm;
    expect_embd_accesses_are_the_batch_rows(acc, m, tj, model, arm, routed);
    EXPECT_EQ(sa["embd_rows_read"], tokens) << arm;
    EXPECT_EQ(sa["embd_rows_unread"], 0) << arm;
    EXPECT_EQ(sa["moe_steps_routed"], is_moe(GetParam()) ? tokens * m.n_layer : 0u) << arm;
    EXPECT_EQ(sa["moe_steps_unrouted"], 0) << arm;
    EXPECT_EQ(c["unrecorded_demand_fills"], 0) << arm;
    EXPECT_EQ(tj["tokens"].size(), tokens);
    EXPECT_FALSE(tj["prompt_tokens"].empty());
    if (tensor) {
      EXPECT_EQ(sa["chunks_let_go_early"], c["consumed_early"]);
    }
    tokens_of[label] = tj["tokens"].dump();
    logits_of[label] = test::slurp(out + "/logits.f32");
    EXPECT_EQ(logits_of[label].size(), tokens * j["model"]["n_vocab"].get<size_t>() * 4);
    EXPECT_EQ(count_lines(test::slurp(out + "/logits.sha256")), tokens);

    if (label == "pager-declared") declared_out = out;
    if (is_moe(GetParam())) {
      const std::string routes = test::slurp(out + "/routes.jsonl");
      EXPECT_EQ(count_lines(routes), tokens * m.n_layer) << arm;
      std::istringstream in(routes);
      std::string line;
      while (std::getline(in, line)) {
        const auto rj = nlohmann::json::parse(line);
        for (const auto& row : rj["experts"]) {
          EXPECT_EQ(row.size(), 2u);
          for (const auto& e : row) EXPECT_LT(e.get<int>(), 4);
        }
      }
    }
  }
  // Byte-identical tokens and logits in every arm.
  ASSERT_TRUE(tokens_of.count("kernel-mmap"));
  for (const auto& [arm, t] : tokens_of) {
    EXPECT_EQ(t, tokens_of["kernel-mmap"]) << arm;
    EXPECT_TRUE(logits_of[arm] == logits_of["kernel-mmap"]) << arm << ": logits differ";
  }
  ASSERT_FALSE(declared_out.empty());
  expect_declared_over_opt_at_least_one(declared_out, GetParam());
}

// Every name the matrix holds must be a test name gtest accepts ([A-Za-z0-9_]).
std::string param_name(const ::testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Models, Generate, ::testing::Values(std::string("dense"), std::string("moe")));
INSTANTIATE_TEST_SUITE_P(Arch, Generate, ::testing::ValuesIn(arch_matrix()), param_name);

// Budgets below the largest object: the oversize steps run with per-thread pins and the
// policies' in-step rules; every arm must still be byte-identical to the kernel mapping,
// keep its books with the kernel's (eager reconcile), stay inside the budget and finish
// (the watchdog would fail a livelock). 16 KiB chunks make every layer object oversize.
class TightBudget : public ::testing::TestWithParam<std::string> {};

TEST_P(TightBudget, EveryArmIsExactBelowTheLargestObject) {
  MODEL_OR_SKIP(model, GetParam());
  test::TempDir dir;
  constexpr uint64_t chunk = 16 << 10;
  const Manifest m = manifest_of(model, chunk);
  const uint32_t threads = 2, depth = 2;
  const uint64_t own = chunk + Pager::page_table_reserve(static_cast<uint64_t>(m.chunks) * chunk);
  const uint64_t min_d = Pager::kPinsPerThread * threads + 2;
  const uint64_t min_e = min_d + depth;
  ASSERT_GT(m.max_step_chunks(), min_e + 1) << "the test model's largest object must exceed the budgets";
  const uint32_t tokens = 6;
  std::string oracle_tokens, oracle_logits;
  struct Cell {
    std::string arm;
    uint64_t budget_chunks;
  };
  std::vector<Cell> cells = {{"kernel-mmap", 0},         {"pager-lru", min_e},      {"pager-declared", min_e},
                             {"pager-declared", min_d},  {"pager-prefetch", min_e}, {"pager-zero", min_d},
                             {"pager-lru", min_d}};
  for (const auto& cell : cells) {
    if (cell.arm != "kernel-mmap") {
      if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
    }
    const std::string what = cell.arm + "@" + std::to_string(cell.budget_chunks);
    const std::string out = dir.file("run-" + cell.arm + "-" + std::to_string(cell.budget_chunks));
    std::vector<std::string> args = {"generate", "--model", model, "--out", out, "--arm", cell.arm, "--prompt",
                                     "the quick brown fox jumps", "--tokens", std::to_string(tokens), "--threads",
                                     std::to_string(threads), "--ctx", "64", "--chunk-size", std::to_string(chunk),
                                     "--watchdog-s", "60", "--eager-reconcile"};
    if (cell.arm != "kernel-mmap")
      args.insert(args.end(), {"--budget-bytes", std::to_string(cell.budget_chunks * chunk + own), "--prefetch-depth",
                               std::to_string(depth)});
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("stderr.txt"));
    ASSERT_EQ(r.status, 0) << what << ": " << r.err;
    const auto j = load_json(out + "/run.json");
    ASSERT_EQ(j["status"], "ok") << what;
    const auto& c = j["counters"];
    EXPECT_EQ(c["steps"], tokens * m.objects.size()) << what;
    EXPECT_EQ(c["reconcile_mismatches"], 0) << what;
    EXPECT_EQ(j["signal_audit"]["foreign_reads"], 0) << what;
    EXPECT_TRUE(j["signal_audit"]["zero_signal_chunks"].empty()) << what;
    if (cell.arm != "kernel-mmap") {
      EXPECT_EQ(j["budget"]["budget_chunks"], cell.budget_chunks) << what;
      EXPECT_LE(c["max_resident_chunks"].get<uint64_t>(), cell.budget_chunks) << what;
      EXPECT_GT(c["reconcile_checks"].get<uint64_t>(), 0u) << what;
      EXPECT_GT(c["oversize_steps"].get<uint64_t>(), 0u) << what;
      EXPECT_FALSE(j["budget"]["oversize_objects"].empty()) << what;
      EXPECT_LE(c["max_pins"].get<uint64_t>(), Pager::kPinsPerThread * threads) << what;
    }
    // Trace: the embd steps read the batch rows; a miss is a demand fill in that step.
    uint64_t cs = 0, nchunks = 0;
    const auto recs = read_trace(out + "/trace.bin", &cs, &nchunks);
    std::map<uint32_t, std::vector<uint32_t>> acc;
    std::map<uint32_t, std::set<uint32_t>> fills;
    for (const auto& rec : recs)
      if (rec.kind == 2) fills[rec.step].insert(rec.chunk);
    for (const auto& rec : recs) {
      if (rec.kind != 1) continue;
      acc[rec.step].push_back(rec.chunk);
      if (cell.arm != "kernel-mmap") {
        EXPECT_EQ((rec.flags & 1) != 0, fills[rec.step].count(rec.chunk) != 0) << what << " step " << rec.step;
      }
    }
    const auto tj = load_json(out + "/tokens.json");
    expect_embd_accesses_are_the_batch_rows(acc, m, tj, model, what, routed_step_chunks(model, out + "/routes.jsonl", chunk));
    EXPECT_EQ(j["signal_audit"]["moe_steps_unrouted"], 0) << what;
    EXPECT_EQ(c["unrecorded_demand_fills"], 0) << what;
    const std::string logits = test::slurp(out + "/logits.f32");
    if (cell.arm == "kernel-mmap") {
      oracle_tokens = tj["tokens"].dump();
      oracle_logits = logits;
    } else {
      EXPECT_EQ(tj["tokens"].dump(), oracle_tokens) << what;
      EXPECT_TRUE(logits == oracle_logits) << what << ": logits differ from kernel-mmap";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TightBudget, ::testing::Values(std::string("dense"), std::string("moe")));
INSTANTIATE_TEST_SUITE_P(Arch, TightBudget, ::testing::ValuesIn(arch_matrix_one_per_family()), param_name);

TEST(GenerateInput, TruncatedModelExitsTwoWithOneLine) {
  MODEL_OR_SKIP(model, "dense");
  test::TempDir dir;
  const std::string bad = dir.file("truncated.gguf");
  std::filesystem::copy_file(model, bad);
  std::filesystem::resize_file(bad, std::filesystem::file_size(model) / 2);
  const std::string header_only = dir.file("header.gguf");
  std::filesystem::copy_file(model, header_only);
  std::filesystem::resize_file(header_only, 100);
  for (const std::string& m : {bad, header_only}) {
    for (std::string arm : {"kernel-mmap", "pager-declared"}) {
      const std::string out = dir.file("out-" + arm);
      std::vector<std::string> args = {"generate", "--model", m, "--out", out, "--arm", arm, "--prompt", "hi",
                                       "--tokens", "2", "--chunk-size", std::to_string(kChunk)};
      if (arm != "kernel-mmap") args.insert(args.end(), {"--budget-bytes", "100000000"});
      const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("err.txt"));
      EXPECT_EQ(r.status, 2) << m << " " << arm << ": " << r.err;
      EXPECT_EQ(count_lines(r.err), 1u) << r.err;
      EXPECT_EQ(r.err.rfind("residctl: error: ", 0), 0u) << r.err;
      EXPECT_FALSE(exists(out)) << "nothing may be written";
    }
  }
}

TEST(GenerateInput, BudgetBelowTheMinimumNamesTheSmallestAccepted) {
  MODEL_OR_SKIP(model, "dense");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  const std::string out = dir.file("out");
  const auto r = test::spawn_capture(RESIDCTL_PATH,
                                     {"generate", "--model", model, "--out", out, "--arm", "pager-declared",
                                      "--prompt", "hi", "--chunk-size", std::to_string(kChunk), "--budget-bytes",
                                      std::to_string(3 * kChunk)},
                                     dir.file("err.txt"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  const size_t at = r.err.find("--budget-bytes >= ");
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_FALSE(exists(out));
  // The smallest accepted budget is accepted (and runs: every step oversize or not), one
  // byte less is not.
  const uint64_t smallest = std::stoull(r.err.substr(at + 18));
  for (uint64_t b : {smallest - 1, smallest}) {
    const auto rb = test::spawn_capture(RESIDCTL_PATH,
                                        {"generate", "--model", model, "--out", out, "--arm", "pager-declared",
                                         "--prompt", "hi", "--tokens", "2", "--chunk-size", std::to_string(kChunk),
                                         "--budget-bytes", std::to_string(b)},
                                        dir.file("err.txt"));
    EXPECT_EQ(rb.status, b < smallest ? 2 : 0) << b << ": " << rb.err;
  }
  const auto r2 = test::spawn_capture(RESIDCTL_PATH, {"generate", "--model", model, "--out", out, "--arm", "pager-lru",
                                                      "--prompt", "hi"},
                                      dir.file("err.txt"));
  EXPECT_EQ(r2.status, 2) << r2.err;
  EXPECT_NE(r2.err.find("--budget-bytes is required"), std::string::npos) << r2.err;
}

TEST(GenerateInput, CalibrateLoadsAndGeneratesNothing) {
  MODEL_OR_SKIP(model, "dense");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  const std::string out = dir.file("cal");
  const auto r = test::spawn_capture(RESIDCTL_PATH,
                                     {"generate", "--model", model, "--out", out, "--arm", "pager-prefetch", "--prompt",
                                      "hi", "--chunk-size", std::to_string(kChunk), "--budget-bytes", "100000000",
                                      "--calibrate"},
                                     dir.file("err.txt"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = load_json(out + "/run.json");
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["mapping"]["interposed"], true);
  EXPECT_EQ(j["counters"]["demand_fills"], 0);
  EXPECT_EQ(j["counters"]["prefetch_fills"], 0);
  EXPECT_EQ(j["generation"]["tokens"], 0);
  EXPECT_FALSE(exists(out + "/tokens.json"));
  EXPECT_FALSE(exists(out + "/logits.f32"));
}

TEST(GenerateFailure, HeldFaultsEndAsAFailedRunNotAHang) {
  // --fault stall: the storage stops answering after the first passes: llama.cpp's threads
  // block in a fault that is never served. The run must end (watchdog), exit 1, and leave its evidence.
  MODEL_OR_SKIP(model, "dense");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  const Manifest m = manifest_of(model);
  const uint64_t budget = std::max<uint64_t>(m.max_step_chunks() + 1, 2 * Pager::kPinsPerThread + 2) * kChunk + kChunk + 2 * 4096;
  const std::string out = dir.file("held");
  // pager-zero keeps nothing: every pass reads again, so a read after the prefill's exists.
  const uint64_t first_pass_reads = 2 * m.chunks;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = test::spawn_capture(RESIDCTL_PATH,
                                     {"generate", "--model", model, "--out", out, "--arm", "pager-zero", "--prompt",
                                      "hold on", "--tokens", "8", "--chunk-size", std::to_string(kChunk),
                                      "--budget-bytes", std::to_string(budget), "--watchdog-s", "2", "--fault",
                                      "stall@" + std::to_string(first_pass_reads)},
                                     dir.file("err.txt"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_LT(s, 30.0);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  // The pager's watchdog (a fault unserved) or the generation's (no signal): whichever sees it first.
  EXPECT_EQ(r.err.rfind("residctl: run failed: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("watchdog"), std::string::npos) << r.err;
  ASSERT_TRUE(exists(out + "/run.json"));
  const auto j = load_json(out + "/run.json");
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["fault"]["cell"], "stall");
  EXPECT_TRUE(j["fault"]["fired"].get<bool>());
  EXPECT_NE(j["error"].get<std::string>().find("watchdog"), std::string::npos) << j["error"];
  EXPECT_GE(j["generation"]["passes"].get<uint64_t>(), 1u);
  EXPECT_LT(j["generation"]["passes"].get<uint64_t>(), 9u);
  EXPECT_TRUE(exists(out + "/trace.bin"));
  EXPECT_FALSE(exists(out + "/tokens.json"));  // a failed run publishes no generation
}

// ---- the matched sources: P, D and F through the Plan ----------------------------------------

namespace {

std::vector<std::string> generate_args(const std::string& model, const std::string& out, const std::string& arm,
                                       uint64_t chunk, uint32_t tokens) {
  return {"generate", "--model", model, "--out", out, "--arm", arm, "--prompt", "the quick brown fox jumps",
          "--tokens", std::to_string(tokens), "--threads", "2", "--ctx", "64", "--chunk-size", std::to_string(chunk),
          "--watchdog-s", "60"};
}

// Every Plan and source field of a cleanly closed pager run.
void expect_closed_clean(const nlohmann::json& j, const std::string& source, const std::string& what) {
  const auto& ss = j["source_stats"];
  const uint64_t windows = source == "uring" ? 8 : 1;
  EXPECT_EQ(j["source_engine"], source) << what;
  EXPECT_EQ(ss["engine"], source) << what;
  EXPECT_EQ(ss["windows"], windows) << what;
  EXPECT_EQ(ss["depth"], windows) << what;
  EXPECT_EQ(j["config"]["windows"], windows) << what;
  EXPECT_EQ(j["config"]["depth"], windows) << what;
  EXPECT_GT(ss["submissions"].get<uint64_t>(), 0u) << what;
  EXPECT_EQ(ss["submissions"], ss["completions"]) << what;
  EXPECT_GE(ss["peak_depth"].get<uint64_t>(), 1u) << what;
  EXPECT_LE(ss["peak_depth"].get<uint64_t>(), windows) << what;
  if (source != "uring") {
    EXPECT_EQ(ss["peak_depth"], 1) << what;
  }
  EXPECT_EQ(ss["windows_free_at_close"], windows) << what;
  EXPECT_EQ(ss["plan_windows_free_at_close"], windows) << what;
  EXPECT_EQ(ss["tickets_outstanding_at_close"], 0) << what;
  EXPECT_EQ(ss["rejections"], 0) << what;
  EXPECT_EQ(ss["cancellations"], 0) << what;
  EXPECT_GE(ss["physical_bytes"].get<uint64_t>(), ss["logical_bytes"].get<uint64_t>()) << what;
  EXPECT_EQ(ss["physical_bytes"].get<uint64_t>() - ss["logical_bytes"].get<uint64_t>(), ss["padding_bytes"].get<uint64_t>())
      << what;
  EXPECT_GT(ss["read_p50_ns"].get<uint64_t>(), 0u) << what;
  EXPECT_LE(ss["read_p50_ns"].get<uint64_t>(), ss["read_p99_ns"].get<uint64_t>()) << what;
  EXPECT_TRUE(ss["allocation_counter_installed"].get<bool>()) << what;
  if (source == "uring") {
    EXPECT_EQ(ss["dynamic_allocations"], 0) << what;
  }
  EXPECT_EQ(j["budget"]["window_bytes"], windows * j["region"]["chunk_size"].get<uint64_t>()) << what;
  const auto& c = j["counters"];
  EXPECT_GT(c["exposed_source_wait_ns"].get<uint64_t>(), 0u) << what;
  EXPECT_GT(c["waited_faults"].get<uint64_t>(), 0u) << what;
  EXPECT_EQ(c["reconcile_mismatches"], 0) << what;
  EXPECT_GT(c["reconcile_checks"].get<uint64_t>(), 0u) << what;
  const auto& p = j["plan"];
  EXPECT_EQ(p["shutdown"], "ok") << what;
  EXPECT_TRUE(p["balanced"].get<bool>()) << what << " " << p.dump();
  EXPECT_EQ(p["reconcile_violations"], 0) << what << " " << p["first_violation"];
  EXPECT_GT(p["reconcile_checks"].get<uint64_t>(), 0u) << what;
  EXPECT_EQ(p["tickets"]["issued"], p["tickets"]["retired"]) << what;
  EXPECT_EQ(p["tickets"]["issued"], ss["submissions"]) << what;
  EXPECT_EQ(p["tickets"]["copied"], ss["submissions"]) << what;
  EXPECT_EQ(p["objects_published"], ss["submissions"]) << what;
  EXPECT_TRUE(p["consumers"]["balanced"].get<bool>()) << what;
  EXPECT_EQ(p["bundles_failed"], 0) << what;
  EXPECT_TRUE(p["first_rejection"].is_null()) << what;
  EXPECT_EQ(p["slots_vacant_at_close"], p["slots"]) << what;
  EXPECT_EQ(c["demand_fills"].get<uint64_t>() + c["prefetch_fills"].get<uint64_t>(), ss["submissions"].get<uint64_t>())
      << what;
}

}  // namespace

// P (buffered), D (direct, one window) and F (uring, eight windows, read-ahead bundles) fill
// through the Plan at the same tight budget (F pays its eight windows from it, so it keeps
// fewer chunks; with 16 KiB chunks F runs close to its hard minimum and most objects run
// oversize): each is byte-identical to kernel-mmap, keeps its books with the kernel and the
// Plan (eager reconcile), and closes balanced; F allocates nothing on its read path.
class Sources : public ::testing::TestWithParam<std::string> {};

TEST_P(Sources, PDAndFAreExactAtATightBudgetAndCloseBalanced) {
  MODEL_OR_SKIP(model, GetParam());
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  constexpr uint64_t chunk = 16 << 10;
  const Manifest m = manifest_of(model, chunk);
  const uint64_t pt = Pager::page_table_reserve(static_cast<uint64_t>(m.chunks) * chunk);
  const uint64_t min_chunks = Pager::kPinsPerThread * 2 + 2;
  const uint64_t budget = (min_chunks + 2) * chunk + 8 * chunk + pt;  // F: min + 2 chunks; P and D: min + 9
  ASSERT_LT(min_chunks + 9, m.chunks) << "the test model is too small to page";
  const uint32_t tokens = 6;
  std::string oracle_tokens, oracle_logits;
  struct Cell {
    std::string arm, source;
    uint64_t budget;
  };
  const std::vector<Cell> cells = {{"kernel-mmap", "", 0},
                                   {"pager-declared", "buffered", budget},
                                   {"pager-declared", "direct", budget},
                                   {"pager-declared", "uring", budget},
                                   // F with P's and D's cache (seven more chunks): read-ahead in most steps
                                   {"pager-declared", "uring", budget + 7 * chunk},
                                   {"pager-lru", "uring", budget + 7 * chunk}};
  for (const auto& cell : cells) {
    const std::string what = cell.arm + "/" + cell.source + "@" + std::to_string(cell.budget);
    const std::string out = dir.file("run-" + cell.arm + "-" + cell.source + "-" + std::to_string(cell.budget));
    auto args = generate_args(model, out, cell.arm, chunk, tokens);
    if (!cell.source.empty())
      args.insert(args.end(), {"--source", cell.source, "--budget-bytes", std::to_string(cell.budget), "--eager-reconcile"});
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("stderr.txt"));
    ASSERT_EQ(r.status, 0) << what << ": " << r.err;
    const auto j = load_json(out + "/run.json");
    ASSERT_EQ(j["status"], "ok") << what << ": " << j["error"];
    const auto tj = load_json(out + "/tokens.json");
    const std::string logits = test::slurp(out + "/logits.f32");
    if (cell.source.empty()) {
      oracle_tokens = tj["tokens"].dump();
      oracle_logits = logits;
      EXPECT_TRUE(j["source_stats"]["engine"].is_null());
      EXPECT_TRUE(j["plan"].is_null());
      continue;
    }
    EXPECT_EQ(tj["tokens"].dump(), oracle_tokens) << what;
    EXPECT_TRUE(logits == oracle_logits) << what << ": logits differ from kernel-mmap";
    expect_closed_clean(j, cell.source, what);
    EXPECT_EQ(j["counters"]["plan_recycle_refusals"], 0) << what;
    EXPECT_LE(j["counters"]["max_resident_chunks"].get<uint64_t>(), j["budget"]["budget_chunks"].get<uint64_t>()) << what;
    const uint64_t windows = cell.source == "uring" ? 8 : 1;
    EXPECT_EQ(j["budget"]["budget_chunks"], (cell.budget - windows * chunk - pt) / chunk) << what;
    if (cell.source == "uring") {
      if (cell.budget > budget) {
        EXPECT_GT(j["readahead"]["bundles"].get<uint64_t>(), 0u) << what;
      }
    } else {
      EXPECT_EQ(j["readahead"]["bundles"], 0) << what;  // P and D read on demand only
      EXPECT_EQ(j["counters"]["prefetch_fills"], 0) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Sources, ::testing::Values(std::string("dense"), std::string("moe")));

// Invalid completions are rejected and never published; the run fails (exit 1) naming the
// rejection, and nothing of the faulted read's bundle reaches the region.
TEST(GenerateSourceFaults, RejectedReadsFailClosedAndPublishNothing) {
  MODEL_OR_SKIP(model, "dense");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  const Manifest m = manifest_of(model);
  const uint64_t budget = (m.chunks + 8) * kChunk + 2 * 4096;  // F keeps the whole model: reads ahead freely
  struct Cell {
    std::string hook, source, kind;
  };
  const std::vector<Cell> cells = {{"eio@3", "uring", "read-failed"},
                                   {"short-read@3", "uring", "short-read"},
                                   {"stale-completion@3", "uring", "stale-generation"},
                                   {"wrong-object@3", "uring", "wrong-object"},
                                   {"wrong-object@2", "direct", "wrong-object"},
                                   {"eio@3", "direct", "read-failed"},
                                   {"short-read@3", "buffered", "short-read"},
                                   {"stale-completion@3", "direct", "stale-generation"},
                                   {"bundle-extent-failure@0", "uring", "read-failed"}};
  for (const auto& cell : cells) {
    const std::string what = cell.hook + "/" + cell.source;
    const std::string out = dir.file("fault-" + cell.source + "-" + cell.hook.substr(0, cell.hook.find('@')));
    auto args = generate_args(model, out, "pager-declared", kChunk, 6);
    args.insert(args.end(), {"--source", cell.source, "--budget-bytes", std::to_string(budget), "--eager-reconcile",
                             "--fault", cell.hook});
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("stderr.txt"));
    EXPECT_EQ(r.status, 1) << what << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << what << ": " << r.err;
    EXPECT_EQ(r.err.rfind("residctl: run failed: pager: rejected " + cell.kind + " completion for chunk ", 0), 0u)
        << what << ": " << r.err;
    EXPECT_NE(r.err.find(") was published"), std::string::npos) << what << ": " << r.err;
    ASSERT_TRUE(exists(out + "/run.json")) << what;
    EXPECT_FALSE(exists(out + "/tokens.json")) << what;
    EXPECT_FALSE(exists(out + "/logits.f32")) << what;
    const auto j = load_json(out + "/run.json");
    EXPECT_EQ(j["status"], "failed") << what;
    const auto& f = j["fault"];
    ASSERT_TRUE(f.is_object()) << what;
    EXPECT_EQ(f["cell"], cell.hook.substr(0, cell.hook.find('@'))) << what;
    EXPECT_EQ(f["class"], "fatal") << what;
    EXPECT_TRUE(f["fired"].get<bool>()) << what;
    const auto& rj = j["rejection"];
    ASSERT_TRUE(rj.is_object()) << what;
    EXPECT_EQ(rj["kind"], cell.kind) << what;
    EXPECT_EQ(rj["bundle_chunks_published"], 0) << what;
    ASSERT_FALSE(rj["bundle"].empty()) << what;
    EXPECT_GE(j["source_stats"]["rejections"].get<uint64_t>() + (cell.kind == "stale-generation" || cell.kind == "wrong-object" ? 1 : 0), 1u) << what;
    if (cell.hook.rfind("bundle-extent-failure", 0) == 0) {
      EXPECT_GE(rj["bundle"].size(), 2u) << what;
      // None of the bundle's chunks was filled from the faulted step on.
      uint64_t cs = 0, nchunks = 0;
      const auto recs = read_trace(out + "/trace.bin", &cs, &nchunks);
      const auto bundle = rj["bundle"].get<std::vector<uint32_t>>();
      for (const auto& rec : recs) {
        if ((rec.kind == 2 || rec.kind == 3) && rec.step >= rj["step"].get<uint32_t>()) {
          EXPECT_EQ(std::count(bundle.begin(), bundle.end(), rec.chunk), 0) << what << ": chunk " << rec.chunk;
        }
      }
    }
  }
}

// Negative control inside the pager: in pass 1 the engine asks the Plan to recycle a resident
// chunk of the object just consumed while its consumers still hold it. The Plan refuses
// (consumers-live), the chunk stays resident, and the output is still exact.
TEST(GeneratePlan, RecyclingAChunkWithALiveConsumerIsRefused) {
  MODEL_OR_SKIP(model, "dense");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  const Manifest m = manifest_of(model);
  const uint64_t budget = std::max<uint64_t>(m.max_step_chunks() + 2, 8) * kChunk + 8 * kChunk + 2 * 4096;
  const std::string oracle = dir.file("oracle");
  ASSERT_EQ(test::spawn_capture(RESIDCTL_PATH, generate_args(model, oracle, "kernel-mmap", kChunk, 6), dir.file("e")).status, 0);
  for (std::string source : {"direct", "uring"}) {
    const std::string out = dir.file("probe-" + source);
    auto args = generate_args(model, out, "pager-declared", kChunk, 6);
    args.insert(args.end(), {"--source", source, "--budget-bytes", std::to_string(budget), "--eager-reconcile",
                             "--fault", "recycle-live@1"});
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("stderr.txt"));
    ASSERT_EQ(r.status, 0) << source << ": " << r.err;
    const auto j = load_json(out + "/run.json");
    const auto& p = j["recycle_probe"];
    EXPECT_TRUE(p["fired"].get<bool>()) << source;
    EXPECT_EQ(p["answer"], "consumers-live") << source;
    EXPECT_TRUE(p["resident_after"].get<bool>()) << source;
    EXPECT_EQ(j["fault"]["cell"], "recycle-live") << source;
    EXPECT_EQ(j["fault"]["class"], "control") << source;
    EXPECT_TRUE(j["fault"]["fired"].get<bool>()) << source;
    EXPECT_GE(j["plan"]["recycle_refusals"].get<uint64_t>(), 1u) << source;
    EXPECT_EQ(j["plan"]["refusals"]["consumers-live"], 1) << source;
    EXPECT_EQ(j["counters"]["plan_recycle_refusals"], 1) << source;
    EXPECT_TRUE(test::slurp(out + "/logits.f32") == test::slurp(oracle + "/logits.f32")) << source;
    expect_closed_clean(j, source, "probe " + source);
  }
}

TEST(GenerateInput, WindowsAndDepthAreCheckedPerSource) {
  MODEL_OR_SKIP(model, "dense");
  test::TempDir dir;
  const std::string out = dir.file("out");
  const std::vector<std::vector<std::string>> bad = {{"--source", "direct", "--windows", "2"},
                                                     {"--source", "buffered", "--depth", "2"},
                                                     {"--source", "uring", "--windows", "2", "--depth", "3"},
                                                     {"--source", "uring", "--windows", "0"},
                                                     {"--source", "mmap"}};
  for (const auto& extra : bad) {
    auto args = generate_args(model, out, "pager-declared", kChunk, 2);
    args.insert(args.end(), {"--budget-bytes", "100000000"});
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("err.txt"));
    std::string joined;
    for (const auto& a : extra) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << joined << r.err;
    EXPECT_EQ(r.err.rfind("residctl: error: ", 0), 0u) << joined << r.err;
    EXPECT_FALSE(exists(out)) << joined;
  }
}

// The object boundaries come from the graph: the first pass of each graph shape (prefill,
// first decode) discovers them; a run given a plan learned by an earlier run discovers
// nothing and computes exactly the same; a wrong plan is caught by the weight-read audit.
TEST(GenerateGraphPlan, DiscoveredOnceReusedExactlyAndAuditedWhenWrong) {
  MODEL_OR_SKIP(model, "dense");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  const Manifest m = manifest_of(model);
  const std::string oracle = dir.file("oracle"), plan = dir.file("plan.json");
  auto args = generate_args(model, oracle, "kernel-mmap", kChunk, 6);
  args.insert(args.end(), {"--graph-plan-out", plan});
  ASSERT_EQ(test::spawn_capture(RESIDCTL_PATH, args, dir.file("e")).status, 0);
  auto j = load_json(oracle + "/run.json");
  EXPECT_EQ(j["signal_audit"]["discovery_passes"], 2);  // the prefill's shape and the decode's
  EXPECT_EQ(j["signal_audit"]["objects_out_of_order"], 0);
  const auto p = load_json(plan);
  ASSERT_EQ(p["shapes"].size(), 2u);
  for (const auto& s : p["shapes"]) EXPECT_EQ(s["boundaries"].size(), m.objects.size() - 1);

  const std::string paged = dir.file("paged");
  args = generate_args(model, paged, "pager-declared", kChunk, 6);
  const uint64_t budget = (m.chunks + 2) * kChunk + 2 * 4096;
  args.insert(args.end(), {"--budget-bytes", std::to_string(budget), "--graph-plan", plan, "--eager-reconcile"});
  ASSERT_EQ(test::spawn_capture(RESIDCTL_PATH, args, dir.file("e")).status, 0);
  j = load_json(paged + "/run.json");
  EXPECT_EQ(j["signal_audit"]["discovery_passes"], 0);
  EXPECT_EQ(j["config"]["graph_plan"], plan);
  EXPECT_TRUE(test::slurp(paged + "/logits.f32") == test::slurp(oracle + "/logits.f32"));

  // Every boundary one object late: layer.N's weights are read while layer.N-1 is current.
  auto bad = p;
  for (auto& s : bad["shapes"]) {
    auto& bs = s["boundaries"];
    for (size_t i = bs.size() - 1; i > 0; --i) bs[i]["object"] = bs[i - 1]["object"];
  }
  const std::string bad_plan = dir.file("bad-plan.json");
  std::ofstream(bad_plan) << bad.dump();
  const std::string wrong = dir.file("wrong");
  args = generate_args(model, wrong, "kernel-mmap", kChunk, 6);
  args.insert(args.end(), {"--graph-plan", bad_plan});
  const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("e"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("signal"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(wrong + "/tokens.json"));
}

// ---- models that cannot run: one line, exit 2, the model and the reason named ----------------

namespace {

// tiny-dense rewritten through gguf (tensor data included) with its metadata changed.
std::string rewritten(const std::string& model, const std::string& out, const std::function<void(gguf_context*)>& edit) {
  ggml_context* data = nullptr;
  gguf_init_params p{};
  p.no_alloc = false;
  p.ctx = &data;
  gguf_context* src = gguf_init_from_file(model.c_str(), p);
  if (!src) return {};
  gguf_context* g = gguf_init_empty();
  gguf_set_kv(g, src);
  edit(g);
  for (int64_t t = 0; t < gguf_get_n_tensors(src); ++t) gguf_add_tensor(g, ggml_get_tensor(data, gguf_get_tensor_name(src, t)));
  const bool ok = gguf_write_to_file(g, out.c_str(), false);
  gguf_free(g);
  gguf_free(src);
  ggml_free(data);
  return ok ? out : std::string();
}

}  // namespace

TEST(GenerateInput, ModelsThatCannotRunAreOneLineErrorsNamingTheModel) {
  MODEL_OR_SKIP(model, "dense");
  test::TempDir dir;
  const std::string unknown = rewritten(model, dir.file("unknown-arch.gguf"),
                                        [](gguf_context* g) { gguf_set_val_str(g, "general.architecture", "fooarch"); });
  const std::string split = rewritten(model, dir.file("split-00001-of-00002.gguf"), [](gguf_context* g) {
    gguf_set_val_u16(g, "split.no", 0);
    gguf_set_val_u16(g, "split.count", 2);
  });
  const std::string no_arch = rewritten(model, dir.file("no-arch.gguf"),
                                        [](gguf_context* g) { gguf_remove_key(g, "general.architecture"); });
  ASSERT_FALSE(unknown.empty() || split.empty() || no_arch.empty());
  struct Cell {
    std::string model, needle;
  };
  const std::vector<Cell> cells = {
      {unknown, "architecture 'fooarch' (general.architecture) is not one the pinned llama.cpp ("},
      {split, "is part 1 of a split GGUF (split.count = 2): the pager maps one file"},
      {no_arch, "has no general.architecture"}};
  for (const auto& cell : cells)
    for (std::string arm : {"kernel-mmap", "pager-declared"}) {
      const std::string out = dir.file("out-" + arm);
      auto args = generate_args(cell.model, out, arm, kChunk, 2);
      if (arm != "kernel-mmap") args.insert(args.end(), {"--budget-bytes", "100000000"});
      const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("err.txt"));
      EXPECT_EQ(r.status, 2) << cell.model << " " << arm << ": " << r.err;
      EXPECT_EQ(count_lines(r.err), 1u) << r.err;
      EXPECT_EQ(r.err.rfind("residctl: error: model " + cell.model, 0), 0u) << r.err;
      EXPECT_NE(r.err.find(cell.needle), std::string::npos) << r.err;
      EXPECT_FALSE(exists(out)) << "nothing may be written";
    }
}

// Weights llama.cpp does not use in place from the file (here: repacked at load, the
// --repack negative control on a Q4_0 model) are refused after the load, before any run, in
// every arm. Which extra buffer takes them depends on the CPU: with AMX int8, llama.cpp's AMX
// buffer takes every weight (F16 too, so the F16 model is refused as well); without it,
// CPU_REPACK takes only repackable types and a model with nothing to repack (F16) loads and
// runs under the same control.
TEST(GenerateInput, WeightsNotFileBackedAfterTheLoadAreRefused) {
  MODEL_OR_SKIP(q4, "llama-dense-untied-q4_0");
  MODEL_OR_SKIP(f16, "llama-dense-tied-f16");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  const Manifest m = manifest_of(q4);
  const std::string budget = std::to_string((m.chunks / 2 + 8) * kChunk);
  const bool amx = ggml_cpu_has_amx_int8() != 0;
  const std::string buffer = amx ? "AMX" : "CPU_REPACK";
  const std::string needle = " is not file-backed after loading: llama.cpp holds it outside the model's mapping (" +
                             buffer + " buffer)";
  for (std::string arm : {"kernel-mmap", "pager-lru", "pager-declared"}) {
    const std::string out = dir.file("out-" + arm);
    auto args = generate_args(q4, out, arm, kChunk, 2);
    args.push_back("--repack");
    if (arm != "kernel-mmap") args.insert(args.end(), {"--budget-bytes", budget});
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("err.txt"));
    EXPECT_EQ(r.status, 2) << arm << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("residctl: error: model " + q4 + ": tensor ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out)) << arm;
  }
  const std::string out = dir.file("f16");
  auto args = generate_args(f16, out, "kernel-mmap", kChunk, 2);
  args.push_back("--repack");
  const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("err.txt"));
  if (amx) {
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out));
    return;
  }
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = load_json(out + "/run.json");
  EXPECT_EQ(j["llama"]["use_extra_bufts"], true);
  EXPECT_EQ(j["llama"]["repack_disabled"], false);
  EXPECT_EQ(j["signal_audit"]["outside_reads"], 0);
}

TEST(LlamaAdapter, WeightsOutsideTheMappingOrAtAnotherOffsetAreNotFileBacked) {
  std::vector<TensorInfo> ts;
  uint64_t off = 4096;
  for (const char* n : {"token_embd.weight", "blk.0.attn_norm.weight", "output_norm.weight"}) {
    ts.push_back({n, "F32", off, 4096, {}});
    off += 4096;
  }
  const Manifest m = build_manifest(ts, off, 4096, 4096);
  std::vector<std::byte> mapping(off), elsewhere(4096);
  const auto base = reinterpret_cast<uintptr_t>(mapping.data());
  ggml_init_params ip{8 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(ip);
  std::vector<std::pair<std::string, ggml_tensor*>> weights;
  for (const auto& t : m.tensors) {
    ggml_tensor* w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1024);
    w->data = mapping.data() + t.offset;
    weights.emplace_back(t.name, w);
  }
  EXPECT_FALSE(weight_not_file_backed(weights, m, base, off).has_value());
  weights[1].second->data = mapping.data() + m.tensors[2].offset;  // another tensor's bytes
  auto why = weight_not_file_backed(weights, m, base, off);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("tensor blk.0.attn_norm.weight is not file-backed after loading: llama.cpp reads it at file offset 12288, "
                      "the GGUF puts it at 8192"),
            std::string::npos)
      << *why;
  weights[1].second->data = elsewhere.data();  // a copy
  why = weight_not_file_backed(weights, m, base, off);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("outside the model's mapping"), std::string::npos) << *why;
  weights[1].second->data = mapping.data() + m.tensors[1].offset;
  weights.emplace_back("mystery.weight", weights[0].second);
  why = weight_not_file_backed(weights, m, base, off);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("mystery.weight"), std::string::npos) << *why;
  ggml_free(ctx);
}

// A MoE GGUF whose expert tensors do not match its metadata (llama.expert_count rewritten to
// 3; the tensors stack 4 experts) is bad input before any run: one line naming the model and
// the tensor.
TEST(GenerateInput, MoEExpertTensorsNotMatchingTheMetadataAreRefused) {
  MODEL_OR_SKIP(model, "moe");
  test::TempDir dir;
  const std::string bad = rewritten(model, dir.file("bad-experts.gguf"),
                                    [](gguf_context* g) { gguf_set_val_u32(g, "llama.expert_count", 3); });
  ASSERT_FALSE(bad.empty());
  for (std::string arm : {"kernel-mmap", "pager-lru"}) {
    const std::string out = dir.file("out-" + arm);
    auto args = generate_args(bad, out, arm, kChunk, 2);
    if (arm != "kernel-mmap") args.insert(args.end(), {"--budget-bytes", "100000000"});
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("err.txt"));
    EXPECT_EQ(r.status, 2) << arm << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("residctl: error: model " + bad + ": expert tensor blk.0.ffn_", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("stacks 4 experts along its last dimension, but the metadata (llama.expert_count) says 3"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(exists(out)) << "nothing may be written";
  }
}

// The route check's negative control: routes read at a node the graph lacks (--route-node)
// stop a MoE run at its first expert-kernel read, one line naming the node and the tensor; a
// dense model has no expert kernel and runs.
TEST(GenerateRoutes, AnExpertKernelWithoutItsRouteNodeStopsTheRun) {
  MODEL_OR_SKIP(moe, "moe");
  MODEL_OR_SKIP(dense, "dense");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  for (const auto& [model, arm] : {std::pair{moe, "kernel-mmap"}, {moe, "pager-lru"}, {dense, "pager-lru"}}) {
    const std::string out = dir.file(std::string("out-") + arm + (model == moe ? "-moe" : "-dense"));
    auto args = generate_args(model, out, arm, kChunk, 3);
    if (std::string(arm) != "kernel-mmap") args.insert(args.end(), {"--budget-bytes", "100000000"});
    args.insert(args.end(), {"--route-node", "ffn_moe_nothing"});
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("err.txt"));
    const auto j = load_json(out + "/run.json");
    if (model == dense) {
      EXPECT_EQ(r.status, 0) << r.err;
      EXPECT_EQ(j["signal_audit"]["route_events"], 0);
      continue;
    }
    EXPECT_EQ(r.status, 1) << arm << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    const std::string want = "residctl: run failed: routes: node ffn_moe_gate-0 (MUL_MAT_ID) reads expert tensor "
                             "blk.0.ffn_gate_exps.weight, but no ffn_moe_nothing-0 node was read before it in this pass";
    EXPECT_EQ(r.err.rfind(want, 0), 0u) << r.err;
    EXPECT_GT(j["signal_audit"]["route_violations"], 0) << arm;
    EXPECT_EQ(j["signal_audit"]["route_events"], 0) << arm;
    EXPECT_EQ(j["status"], "failed") << arm;
  }
}

// The identity records of two pager arms of one build, model and prompt are equal field by
// field (consumer: engine, adapter, runtime, graph, router, expert kernel, reduction,
// scheduling boundary; destination: the pager region, no device); arm A's destination is the
// file mapping and its graph the same; another thread count is another reduction. demand.json
// says how the graph read every tensor: the routed expert tensors by experts, the embedding
// by rows (the prompt's and the fed-back tokens'), the rest whole.
TEST(GenerateIdentity, ConsumerAndDestinationRecordsCompareStructurally) {
  MODEL_OR_SKIP(model, "moe");
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  test::TempDir dir;
  auto run = [&](const std::string& arm, const std::string& threads) {
    const std::string out = dir.file("out-" + arm + "-t" + threads);
    auto args = generate_args(model, out, arm, kChunk, 4);
    if (arm != "kernel-mmap") args.insert(args.end(), {"--budget-bytes", "600000"});
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--threads") args[i + 1] = threads;
    const auto r = test::spawn_capture(RESIDCTL_PATH, args, dir.file("err.txt"));
    EXPECT_EQ(r.status, 0) << arm << ": " << r.err;
    return load_json(out + "/run.json");
  };
  const auto lru = run("pager-lru", "2"), zero = run("pager-zero", "2"), mmap = run("kernel-mmap", "2"),
             one = run("pager-lru", "1");
  EXPECT_EQ(lru["consumer"], zero["consumer"]);
  EXPECT_EQ(lru["destination"], zero["destination"]);
  EXPECT_EQ(lru["destination"]["host"]["memory"], "pager-region");
  EXPECT_EQ(lru["destination"]["device"]["memory"], "none");
  EXPECT_EQ(mmap["destination"]["host"]["memory"], "file-mapping");
  EXPECT_EQ(mmap["consumer"]["graph"], lru["consumer"]["graph"]);
  EXPECT_EQ(lru["consumer"]["graph"]["passes"], 4);
  EXPECT_EQ(lru["consumer"]["expert_kernel"]["ops"], nlohmann::json::array({"MUL_MAT_ID"}));
  EXPECT_EQ(lru["consumer"]["router"]["n_expert"], 4);
  EXPECT_NE(one["consumer"]["reduction"], lru["consumer"]["reduction"]);
  EXPECT_EQ(one["consumer"]["graph"], lru["consumer"]["graph"]);
  EXPECT_EQ(lru["identity"]["engine_sha256"], lru["consumer"]["engine"]["sha256"]);
  EXPECT_EQ(lru["identity"]["adapter_sha256"].get<std::string>().size(), 64u);
  const auto d = load_json(dir.file("out-pager-lru-t2") + "/demand.json");
  const auto tj = load_json(dir.file("out-pager-lru-t2") + "/tokens.json");
  std::set<int32_t> fed;
  for (const auto& t : tj["prompt_tokens"]) fed.insert(t.get<int32_t>());
  for (size_t i = 0; i + 1 < tj["tokens"].size(); ++i) fed.insert(tj["tokens"][i].get<int32_t>());
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& t : d["tensors"]) by_name[t["name"]] = t;
  EXPECT_EQ(by_name.at("token_embd.weight")["read"], nlohmann::json::array({"rows"}));
  EXPECT_EQ(by_name.at("token_embd.weight")["rows"], nlohmann::json(std::vector<int32_t>(fed.begin(), fed.end())));
  EXPECT_EQ(by_name.at("blk.1.ffn_down_exps.weight")["read"], nlohmann::json::array({"experts"}));
  EXPECT_EQ(by_name.at("blk.1.ffn_gate_inp.weight")["read"], nlohmann::json::array({"whole"}));
  EXPECT_EQ(by_name.at("output.weight")["read"], nlohmann::json::array({"whole"}));
}

// --graph-plan's numbers: an occurrence or a token count that is no integer in range is bad
// input, not a float converted with undefined behaviour (the graph_plan fuzz target found an
// occurrence of 1e66; engine/fuzz/).
TEST(EvalObserver, GraphPlanNumbersOutOfRangeAreInputErrors) {
  std::vector<TensorInfo> ts;
  uint64_t off = 4096;
  for (const char* n : {"token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight", "output.weight"}) {
    ts.push_back({n, "F32", off, 8192, {}});
    off += 8192;
  }
  const Manifest m = build_manifest(ts, off, 4096, 4096);
  struct NoListener : StepListener {
    void pass_started(std::optional<std::vector<uint32_t>>) override {}
    void object_entered(uint32_t) override {}
    void routes(int, std::vector<std::vector<int32_t>>) override {}
  } listener;
  const auto plan = [](const nlohmann::json& occurrence, const nlohmann::json& tokens) {
    return nlohmann::json{{"schema_version", 1},
                          {"shapes", {{{"tokens", tokens},
                                       {"boundaries", {{{"node", "norm-0"}, {"occurrence", occurrence},
                                                        {"object", "layer.0"}}}}}}}}
        .dump();
  };
  EvalObserver ok(m, listener);
  EXPECT_NO_THROW(ok.load_plans_text(plan(1, 7), "p.json"));
  EXPECT_NO_THROW(ok.load_plans_text(plan(4294967295u, -1), "p.json"));
  for (const auto& [occurrence, tokens] : std::vector<std::pair<nlohmann::json, nlohmann::json>>{
           {1e66, 7}, {1.5, 7}, {-1, 7}, {4294967296u, 7}, {"1", 7}, {1, 1e30}, {1, 18446744073709551615u}, {1, 2.5}}) {
    EvalObserver o(m, listener);
    try {
      o.load_plans_text(plan(occurrence, tokens), "p.json");
      ADD_FAILURE() << "accepted occurrence " << occurrence << ", tokens " << tokens;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--graph-plan"), std::string::npos) << e.what();
    }
  }
}
