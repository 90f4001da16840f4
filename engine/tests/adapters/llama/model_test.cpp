// The llama adapter's pure logic, without llama.cpp: objects and chunks from a tensor list,
// the sequence-declared policy against brute-force Belady, and the startup signal audit.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "adapters/llama/objects.hpp"
#include "core/errors.hpp"
#include "pager/signal_audit.hpp"
#include "policy/declared.hpp"
#include "policy/policy.hpp"

using namespace resid;

namespace {

// A llama-like tensor list: token_embd, n_layer layers of 4 tensors, output_norm, [output].
std::vector<TensorInfo> llama_like(uint32_t n_layer, bool tied, uint64_t data_offset, uint64_t* end) {
  std::vector<TensorInfo> ts;
  uint64_t off = data_offset;
  auto add = [&](std::string name, uint64_t bytes) {
    ts.push_back({std::move(name), "Q8_0", off, bytes, {}});
    off += (bytes + 31) / 32 * 32;
  };
  add("token_embd.weight", 300000);
  for (uint32_t l = 0; l < n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", 512);
    add(p + "attn_q.weight", 70000);
    add(p + "ffn_up.weight", 90000);
    add(p + "ffn_down.weight", 90000);
  }
  add("output_norm.weight", 512);
  if (!tied) add("output.weight", 300000);
  *end = off;
  return ts;
}

void check_cover(const Manifest& m) {
  for (const auto& o : m.objects) {
    std::set<ChunkId> want;
    for (uint32_t t : o.tensors) {
      const auto& ti = m.tensors[t];
      if (!ti.bytes) continue;
      for (uint64_t c = ti.offset / m.chunk_size; c <= (ti.offset + ti.bytes - 1) / m.chunk_size; ++c)
        want.insert(static_cast<ChunkId>(c));
      // The extents hold the tensor.
      bool held = false;
      for (auto [b, e] : o.extents) held |= b <= ti.offset && ti.offset + ti.bytes <= e;
      EXPECT_TRUE(held) << o.name << " " << ti.name;
    }
    EXPECT_EQ(std::vector<ChunkId>(want.begin(), want.end()), o.chunks) << o.name;
    EXPECT_TRUE(std::is_sorted(o.extents.begin(), o.extents.end()));
  }
}

}  // namespace

TEST(Manifest, ObjectsInComputeOrderEveryTensorOnce) {
  uint64_t end = 0;
  auto ts = llama_like(5, false, 4096, &end);
  const Manifest m = build_manifest(ts, end + 100, 4096, 65536);
  ASSERT_EQ(m.objects.size(), 7u);
  EXPECT_EQ(m.objects.front().name, "embd");
  for (int l = 0; l < 5; ++l) EXPECT_EQ(m.objects[l + 1].name, "layer." + std::to_string(l));
  EXPECT_EQ(m.objects.back().name, "output");
  EXPECT_FALSE(m.tied_output);
  EXPECT_EQ(m.n_layer, 5u);
  EXPECT_EQ(m.chunks, (end + 100 + 65535) / 65536);
  std::vector<int> seen(m.tensors.size(), 0);
  for (const auto& o : m.objects)
    for (uint32_t t : o.tensors) ++seen[t];
  for (size_t t = 0; t < seen.size(); ++t) EXPECT_EQ(seen[t], 1) << m.tensors[t].name;
  check_cover(m);
  EXPECT_EQ(m.step_chunks().size(), 7u);
  // The step order is the JSON's too.
  const auto j = m.to_json();
  EXPECT_EQ(j["step_order"].size(), 7u);
  EXPECT_EQ(j["objects"][1]["name"], "layer.0");
  EXPECT_EQ(j["objects"][1]["tensors"].size(), 4u);
}

TEST(Manifest, TiedOutputSharesTheTokenEmbedding) {
  uint64_t end = 0;
  auto ts = llama_like(3, true, 8192, &end);
  const Manifest m = build_manifest(ts, end, 8192, 65536);
  EXPECT_TRUE(m.tied_output);
  std::map<std::string, int> seen;
  for (const auto& o : m.objects)
    for (uint32_t t : o.tensors) ++seen[m.tensors[t].name];
  for (const auto& [name, n] : seen) EXPECT_EQ(n, name == "token_embd.weight" ? 2 : 1) << name;
  const auto& out = m.objects.back();
  const auto& embd = m.objects.front();
  for (ChunkId c : embd.chunks) EXPECT_TRUE(std::binary_search(out.chunks.begin(), out.chunks.end(), c));
  EXPECT_GE(m.max_step_chunks(), out.chunks.size());
  check_cover(m);
}

TEST(Manifest, TensorLookupByOffset) {
  uint64_t end = 0;
  auto ts = llama_like(2, false, 4096, &end);
  const Manifest m = build_manifest(ts, end, 4096, 65536);
  for (uint32_t t = 0; t < m.tensors.size(); ++t) {
    EXPECT_EQ(m.tensor_at(m.tensors[t].offset), t);
    EXPECT_EQ(m.tensor_at(m.tensors[t].offset + m.tensors[t].bytes - 1), t);
  }
  EXPECT_FALSE(m.tensor_at(0).has_value());  // the header
  const uint32_t q0 = *m.tensor_at(m.tensors[2].offset);
  EXPECT_TRUE(m.object_has_tensor(1, q0));
  EXPECT_FALSE(m.object_has_tensor(2, q0));
}

TEST(Manifest, BadModelsAreInputErrors) {
  uint64_t end = 0;
  auto ts = llama_like(2, false, 4096, &end);
  // Truncated: the last tensor runs past the end of the file.
  EXPECT_THROW(build_manifest(ts, end - 1000, 4096, 65536), InputError);
  try {
    build_manifest(ts, end / 2, 4096, 65536);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  auto unknown = ts;
  unknown.push_back({"mystery.weight", "F32", end, 64, {}});
  EXPECT_THROW(build_manifest(unknown, end + 64, 4096, 65536), InputError);
  auto gap = ts;
  gap.erase(std::remove_if(gap.begin(), gap.end(), [](const TensorInfo& t) { return t.name.rfind("blk.0.", 0) == 0; }),
            gap.end());
  EXPECT_THROW(build_manifest(gap, end, 4096, 65536), InputError);
  auto overlap = ts;
  overlap[2].offset -= 10;
  EXPECT_THROW(build_manifest(overlap, end, 4096, 65536), InputError);
}

// A MoE layer reads its router's experts only: of each expert tensor (*_exps.*, the experts
// stacked in equal slices), the slices of the routed experts; its other tensors whole; and
// tensors shared by every layer (rope factors) go into every layer.
TEST(Manifest, MoELayersReadTheirRoutedExpertsOnly) {
  std::vector<TensorInfo> ts;
  uint64_t off = 4096;
  auto add = [&](std::string name, uint64_t bytes) {
    ts.push_back({std::move(name), "Q8_0", off, bytes, {}});
    off += bytes;
  };
  const uint64_t chunk = 4096, slice = 2 * chunk;  // each expert's slice: two whole chunks
  add("rope_factors_short.weight", 64);
  add("token_embd.weight", chunk - 64);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", chunk);
    add(p + "ffn_gate_inp.weight", chunk);
    add(p + "ffn_up_exps.weight", 4 * slice);
    add(p + "ffn_down_exps.weight", 4 * slice);
  }
  add("output_norm.weight", chunk);
  add("output.weight", chunk);
  const Manifest m = build_manifest(ts, off, 4096, chunk, 4);
  EXPECT_EQ(m.n_expert, 4u);
  const uint32_t l0 = *m.layer_object(0), l1 = *m.layer_object(1);
  ASSERT_EQ(m.objects[l0].expert_tensors.size(), 2u);
  EXPECT_TRUE(m.objects[0].expert_tensors.empty());
  // layer 0: norm chunk 2, router chunk 3, up_exps chunks 4..11, down_exps 12..19; the rope
  // factors (chunk 1, with the embedding) are in both layers.
  EXPECT_EQ(m.objects[l0].chunks.front(), 1u);
  EXPECT_EQ(m.objects[l1].chunks.front(), 1u);
  EXPECT_EQ(m.objects[l0].chunks.size(), 20u - 1u);
  EXPECT_EQ(*m.routed_chunks(l0, {3, 1, 3}), (std::vector<ChunkId>{1, 2, 3, 6, 7, 10, 11, 14, 15, 18, 19}));
  EXPECT_EQ(*m.routed_chunks(l0, {}), (std::vector<ChunkId>{1, 2, 3}));
  EXPECT_EQ(*m.routed_chunks(l0, {0, 1, 2, 3}), m.objects[l0].chunks);  // every expert: the whole layer
  EXPECT_FALSE(m.routed_chunks(l0, {4}).has_value());
  EXPECT_FALSE(m.routed_chunks(l0, {-1}).has_value());
  EXPECT_FALSE(m.routed_chunks(0, {0}).has_value());  // embd has no experts
  EXPECT_EQ(m.to_json()["objects"][l1]["expert_tensors"].size(), 2u);
  // Slices must be equal.
  EXPECT_THROW(build_manifest(ts, off, 4096, chunk, 3), InputError);
}

namespace {

// Tensors with shapes, laid out back to back from offset 4096.
struct ShapedTensors {
  std::vector<TensorInfo> ts;
  uint64_t off = 4096;
  void add(std::string name, uint64_t bytes, std::vector<int64_t> shape) {
    ts.push_back({std::move(name), "Q8_0", off, bytes, std::move(shape)});
    off += bytes;
  }
};

}  // namespace

// One object per expert: layer.N.expert.E is slice E of each of the layer's expert tensors,
// as canonical extents; the layer's other tensors are its dense object; the layer's step
// reads the dense object and the routed experts (routed_chunks is their union).
TEST(Manifest, EveryExpertIsAnObjectOfItsSlices) {
  ShapedTensors list;
  auto add = [&](std::string name, uint64_t bytes, std::vector<int64_t> shape) { list.add(std::move(name), bytes, shape); };
  add("token_embd.weight", 4096, {64, 64});
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", 1024, {256});
    add(p + "ffn_gate_inp.weight", 1024, {256, 4});
    add(p + "ffn_gate_exps.weight", 4 * 3000, {256, 12, 4});
    add(p + "ffn_up_exps.weight", 4 * 3000, {256, 12, 4});
    add(p + "ffn_down_exps.weight", 4 * 3000, {12, 256, 4});
  }
  add("output_norm.weight", 1024, {256});
  add("output.weight", 4096, {64, 64});
  const Manifest m = build_manifest(list.ts, list.off, 4096, 4096, 4, "llama.expert_count");
  ASSERT_EQ(m.experts.size(), 8u);
  const uint32_t l1 = *m.layer_object(1);
  const ExpertObject& x = m.experts[*m.expert_object(1, 2)];
  EXPECT_EQ(x.name, "layer.1.expert.2");
  EXPECT_EQ(x.step, l1);
  ASSERT_EQ(x.slices.size(), 3u);
  const std::vector<std::string> comps = {"gate", "up", "down"};
  uint64_t sum = 0;
  for (size_t i = 0; i < 3; ++i) {
    const TensorInfo& t = m.tensors[x.slices[i].tensor];
    EXPECT_EQ(x.slices[i].component, comps[i]);
    EXPECT_EQ(x.slices[i].offset, t.offset + 2 * 3000);
    EXPECT_EQ(x.slices[i].bytes, 3000u);
    sum += x.slices[i].bytes;
  }
  EXPECT_EQ(x.bytes, sum);
  EXPECT_FALSE(m.expert_object(1, 4).has_value());
  EXPECT_FALSE(m.expert_object(2, 0).has_value());
  // The dense object: the norm and the router, not the experts.
  ASSERT_EQ(m.objects[l1].dense_tensors.size(), 2u);
  EXPECT_EQ(m.tensors[m.objects[l1].dense_tensors[1]].name, "blk.1.ffn_gate_inp.weight");
  // routed_chunks = the dense tensors' chunks + the picked experts' chunks.
  std::set<ChunkId> want;
  for (uint32_t t : m.objects[l1].dense_tensors)
    for (uint64_t c = m.tensors[t].offset / 4096; c <= (m.tensors[t].offset + m.tensors[t].bytes - 1) / 4096; ++c)
      want.insert(static_cast<ChunkId>(c));
  want.insert(x.chunks.begin(), x.chunks.end());
  EXPECT_EQ(*m.routed_chunks(l1, {2, 2}), std::vector<ChunkId>(want.begin(), want.end()));
  const auto j = m.to_json();
  EXPECT_EQ(j["experts"].size(), 8u);
  EXPECT_EQ(j["experts"][6]["name"], "layer.1.expert.2");
  EXPECT_EQ(j["experts"][6]["slices"][2]["component"], "down");
  EXPECT_EQ(j["objects"][l1]["dense"]["name"], "layer.1.dense");
  EXPECT_EQ(j["objects"][l1]["experts"].size(), 4u);
  EXPECT_TRUE(j["objects"][0]["dense"].is_null());
}

// Expert tensors that do not match the metadata are bad input naming the tensor and the key.
TEST(Manifest, ExpertTensorsNotMatchingTheMetadataAreInputErrors) {
  ShapedTensors list;
  auto add = [&](std::string name, uint64_t bytes, std::vector<int64_t> shape) { list.add(std::move(name), bytes, shape); };
  add("token_embd.weight", 4096, {64, 64});
  add("blk.0.attn_norm.weight", 1024, {256});
  add("blk.0.ffn_up_exps.weight", 6 * 4096, {256, 16, 6});
  add("output_norm.weight", 1024, {256});
  auto message = [&](uint32_t n_expert) {
    try {
      build_manifest(list.ts, list.off, 4096, 4096, n_expert, "qwen2moe.expert_count");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(8), "expert tensor blk.0.ffn_up_exps.weight stacks 6 experts along its last dimension, but the "
                        "metadata (qwen2moe.expert_count) says 8");
  EXPECT_EQ(message(0), "expert tensor blk.0.ffn_up_exps.weight is stacked per expert (*_exps), but the model's "
                        "metadata gives no expert count (qwen2moe.expert_count)");
  EXPECT_EQ(message(6), "no error");
}

// ---- the sequence-declared policy ---------------------------------------------------------

namespace {

using Steps = std::vector<std::vector<ChunkId>>;

// Drives a policy the way generate drives the pager: the chunks of the current step are
// held (not evictable); each is accessed in ascending order; on a miss with a full cache
// the policy picks a victim among the others; the step is signalled when it ends.
uint64_t simulate_steps(Policy& p, const Steps& steps, uint32_t passes, size_t k) {
  std::vector<ChunkId> resident;
  uint64_t misses = 0;
  const uint64_t S = steps.size();
  for (uint64_t g = 0; g < passes * S; ++g) {
    const auto& cur = steps[g % S];
    for (ChunkId c : cur) {
      p.on_access(c);
      if (std::find(resident.begin(), resident.end(), c) != resident.end()) continue;
      ++misses;
      if (resident.size() == k) {
        auto v = p.choose_victim(resident, [&](ChunkId x) { return !std::binary_search(cur.begin(), cur.end(), x); });
        EXPECT_TRUE(v.has_value());
        if (!v) return UINT64_MAX;
        resident.erase(std::find(resident.begin(), resident.end(), *v));
      }
      resident.push_back(c);
      p.on_access(c);
    }
    p.on_signal(g);
  }
  return misses;
}

// Exhaustive OPT over the flattened accesses with the same constraint (a chunk of the
// current step is never a victim), memoized on (position, cache bitmask).
struct Flat {
  std::vector<ChunkId> ref;
  std::vector<uint32_t> held;  // bitmask of the step each access belongs to
};

Flat flatten(const Steps& steps, uint32_t passes) {
  Flat f;
  for (uint32_t p = 0; p < passes; ++p)
    for (const auto& s : steps) {
      uint32_t mask = 0;
      for (ChunkId c : s) mask |= 1u << c;
      for (ChunkId c : s) {
        f.ref.push_back(c);
        f.held.push_back(mask);
      }
    }
  return f;
}

uint64_t opt_brute(const Flat& f, size_t k, bool constrained, size_t pos, uint32_t cache,
                   std::map<std::pair<size_t, uint32_t>, uint64_t>& memo) {
  if (pos == f.ref.size()) return 0;
  const auto key = std::make_pair(pos, cache);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  const uint32_t bit = 1u << f.ref[pos];
  uint64_t best;
  if (cache & bit) {
    best = opt_brute(f, k, constrained, pos + 1, cache, memo);
  } else if (static_cast<size_t>(__builtin_popcount(cache)) < k) {
    best = 1 + opt_brute(f, k, constrained, pos + 1, cache | bit, memo);
  } else {
    best = std::numeric_limits<uint64_t>::max();
    for (uint32_t v = 0; v < 32; ++v) {
      if (!(cache & (1u << v))) continue;
      if (constrained && (f.held[pos] & (1u << v))) continue;
      const uint64_t r = opt_brute(f, k, constrained, pos + 1, (cache & ~(1u << v)) | bit, memo);
      if (r != std::numeric_limits<uint64_t>::max()) best = std::min(best, 1 + r);
    }
  }
  memo[key] = best;
  return best;
}

uint64_t opt(const Steps& steps, uint32_t passes, size_t k, bool constrained) {
  std::map<std::pair<size_t, uint32_t>, uint64_t> memo;
  return opt_brute(flatten(steps, passes), k, constrained, 0, 0, memo);
}

Steps random_steps(std::mt19937& rng, uint32_t chunks, uint32_t n_steps, uint32_t max_per_step) {
  Steps s(n_steps);
  std::uniform_int_distribution<uint32_t> size(1, max_per_step), chunk(0, chunks - 1);
  for (auto& st : s) {
    std::set<ChunkId> cs;
    const uint32_t n = size(rng);
    while (cs.size() < n) cs.insert(chunk(rng));
    st.assign(cs.begin(), cs.end());
  }
  return s;
}

}  // namespace

TEST(SequencePolicy, NextUseDistancesOverTheFlattenedPass) {
  // Pass: {0,1} {1,2} {3} {0,4}  -> flattened 0 1 | 1 2 | 3 | 0 4  (7 accesses)
  DeclaredPolicy p(6, DeclaredSequence{{{0, 1}, {1, 2}, {3}, {0, 4}}}, false);
  EXPECT_EQ(p.accesses_per_pass(), 7u);
  // Before any signal the next step is step 0 (position 0).
  EXPECT_EQ(p.next_use(0), 0u);
  EXPECT_EQ(p.next_use(1), 1u);
  EXPECT_EQ(p.next_use(2), 3u);
  EXPECT_EQ(p.next_use(4), 6u);
  EXPECT_EQ(p.next_use(5), UINT64_MAX);  // never used
  p.on_signal(1);                         // steps 0 and 1 consumed; next is step 2 (position 4)
  EXPECT_EQ(p.next_use(3), 0u);
  EXPECT_EQ(p.next_use(0), 1u);
  EXPECT_EQ(p.next_use(4), 2u);
  EXPECT_EQ(p.next_use(1), 4u);  // next pass, position 1: 7 + 1 - 4
  EXPECT_EQ(p.next_use(2), 6u);
  p.on_signal(0);  // stale: ignored
  EXPECT_EQ(p.cursor(), std::optional<uint64_t>(1));
  std::vector<ChunkId> res = {0, 1, 2, 5};
  EXPECT_EQ(p.choose_victim(res, [](ChunkId) { return true; }), 5u);  // unused first
  EXPECT_EQ(p.choose_victim(res, [](ChunkId c) { return c != 5; }), 2u);
  p.on_signal(6);  // the next pass: step 7 = step 3 of the pass is next
  EXPECT_EQ(p.next_use(0), 0u);
  EXPECT_EQ(p.next_use(4), 1u);
}

TEST(SequencePolicy, PrefetchCandidatesSkipTheCurrentStep) {
  DeclaredPolicy e(8, DeclaredSequence{{{0, 1, 2}, {2, 3}, {4}, {5, 6}, {0, 7}}}, true);
  // Before the first signal step 0 is current: candidates start at step 1, minus step 0's chunks.
  EXPECT_EQ(e.prefetch_candidates(kNoCursor, 2), (std::vector<ChunkId>{3, 4}));
  EXPECT_EQ(e.prefetch_candidates(0, 3), (std::vector<ChunkId>{4, 5, 6}));   // step 1 current
  EXPECT_EQ(e.prefetch_candidates(3, 3), (std::vector<ChunkId>{1, 2, 3}));   // step 4 current: wraps
  EXPECT_EQ(e.prefetch_candidates(0, 100).size(), 6u);  // every chunk outside step 1, once
  DeclaredPolicy d(8, DeclaredSequence{{{0, 1, 2}, {2, 3}}}, false);
  EXPECT_TRUE(d.prefetch_candidates(0, 2).empty());
}

TEST(SequencePolicy, SingletonStepsEqualBeladyOnRandomSequences) {
  // One chunk per step: no constraint beyond the accessed chunk, so the declared policy must
  // match unconstrained Belady exactly, on arbitrary (not only cyclic) declared passes.
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 60; ++trial) {
    const uint32_t chunks = 3 + trial % 5;
    const Steps s = random_steps(rng, chunks, 3 + trial % 6, 1);
    for (size_t k = 1; k <= chunks; ++k) {
      for (uint32_t passes : {1u, 3u}) {
        auto p = make_policy(PolicyKind::Declared, chunks, DeclaredSequence{s});
        const uint64_t d = simulate_steps(*p, s, passes, k);
        EXPECT_EQ(d, opt(s, passes, k, false)) << "trial " << trial << " k=" << k << " passes=" << passes;
      }
    }
  }
}

TEST(SequencePolicy, EqualsStepConstrainedBeladyOnRandomStepSequences) {
  // Steps touching several chunks: the chunks of the current step are held, exactly as in
  // the pager; the declared policy equals the best any policy can do under that rule, and
  // is never below unconstrained Belady on the flattened trace.
  std::mt19937 rng(777);
  int compared = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const uint32_t chunks = 4 + trial % 4;
    const uint32_t per = 1 + trial % 3;
    const Steps s = random_steps(rng, chunks, 2 + trial % 5, per);
    size_t max_step = 0;
    for (const auto& st : s) max_step = std::max(max_step, st.size());
    for (size_t k = max_step; k <= chunks; ++k) {
      for (uint32_t passes : {1u, 2u, 3u}) {
        auto p = make_policy(PolicyKind::Declared, chunks, DeclaredSequence{s});
        const uint64_t d = simulate_steps(*p, s, passes, k);
        const uint64_t c_opt = opt(s, passes, k, true);
        const uint64_t u_opt = opt(s, passes, k, false);
        EXPECT_EQ(d, c_opt) << "trial " << trial << " k=" << k << " passes=" << passes;
        EXPECT_GE(d, u_opt);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 300);
}

TEST(SequencePolicy, LruThrashesALayerScanTheDeclaredPolicyDoesNot) {
  // embd {0..3}, layers {4},{5},...,{9}, output {0..3,10} (tied): the real model's shape.
  Steps s = {{0, 1, 2, 3}};
  for (ChunkId c = 4; c <= 9; ++c) s.push_back({c});
  s.push_back({0, 1, 2, 3, 10});
  const size_t k = 7;
  auto lru = make_policy(PolicyKind::Lru, 11, DeclaredSequence{s});
  auto dec = make_policy(PolicyKind::Declared, 11, DeclaredSequence{s});
  const uint64_t l = simulate_steps(*lru, s, 4, k);
  const uint64_t d = simulate_steps(*dec, s, 4, k);
  EXPECT_LT(d, l);
  EXPECT_EQ(d, opt(s, 4, k, true));
}

// ---- the startup audit ---------------------------------------------------------------------

TEST(StartupAudit, AChunkWithNoSignalFailsTheRunNamingIt) {
  uint64_t end = 0;
  auto ts = llama_like(4, true, 4096, &end);
  const Manifest m = build_manifest(ts, end, 4096, 65536);
  const auto steps = m.step_chunks();
  const uint64_t S = steps.size();
  // Exact signals for three passes: nothing to report.
  {
    SignalAudit a(m.chunks, steps);
    for (uint64_t g = 0; g < 3 * S; ++g) a.record(g);
    EXPECT_EQ(a.out_of_order(), 0u);
    EXPECT_FALSE(startup_audit_error(a, m, 3).has_value());
  }
  // A signal hooked to the wrong node never fires for layer.2.
  {
    SignalAudit a(m.chunks, steps);
    uint64_t last = UINT64_MAX;
    for (uint64_t g = 0; g < 3 * S; ++g) {
      if (g % S == 3) continue;  // layer.2 is object 3
      a.record(g);
      last = g;
    }
    (void)last;
    EXPECT_GT(a.out_of_order(), 0u);
    // The chunks only layer.2 touches.
    std::set<ChunkId> only;
    for (ChunkId c : steps[3]) {
      bool elsewhere = false;
      for (uint64_t s = 0; s < S; ++s)
        if (s != 3 && std::binary_search(steps[s].begin(), steps[s].end(), c)) elsewhere = true;
      if (!elsewhere) only.insert(c);
    }
    ASSERT_FALSE(only.empty());
    const auto err = startup_audit_error(a, m, 3);
    ASSERT_TRUE(err.has_value());
    EXPECT_NE(err->find("declared chunk " + std::to_string(*only.begin())), std::string::npos) << *err;
    EXPECT_NE(err->find("layer.2"), std::string::npos) << *err;
    const auto zero = a.zero_signal_chunks();
    EXPECT_EQ(std::set<ChunkId>(zero.begin(), zero.end()), only);
  }
  // Chunks that are in no object (a header-only chunk) are not declared, never reported.
  {
    SignalAudit a(8, {{1, 2}, {3}});
    a.record(0);
    a.record(1);
    EXPECT_TRUE(a.zero_signal_chunks().empty());
    EXPECT_FALSE(a.declared(0));
    EXPECT_TRUE(a.declared(3));
    EXPECT_EQ(a.count(2), 1u);
  }
}

TEST(SequencePolicy, InAnOversizeStepTheEarliestFilledChunkOfTheStepGoesFirst) {
  // Pass: {0} {1,2} {3,4,5,6,7,8} (an oversize step: six chunks) {9}.
  DeclaredPolicy p(12, DeclaredSequence{{{0}, {1, 2}, {3, 4, 5, 6, 7, 8}, {9}}}, false);
  auto all = [](ChunkId) { return true; };
  p.on_signal(0);  // step 1 current
  p.on_fill(1);
  p.on_fill(2);
  p.on_signal(1);  // step 2 current
  p.on_step_mode(true);
  // Chunk 3 was resident before the step (filled in step 1's time, e.g. a prefetch): not
  // known to be passed. The threads walk the rows forward: 4, 5, 6 are filled in order.
  p.on_fill(4);
  p.on_fill(5);
  p.on_fill(6);
  std::vector<ChunkId> res = {0, 1, 2, 3, 4, 5, 6, 11};
  // The chunk of this step filled earliest in it, ahead of anything farther in the order
  // (11 is never used, 0 and 1 are needed in the next pass).
  EXPECT_EQ(p.choose_victim(res, all), 4u);
  EXPECT_EQ(p.choose_victim(res, [](ChunkId c) { return c != 4; }), 5u);  // 4 pinned/held
  // Chunk 4 refilled (a thread went back to it): it is now the most recent fill.
  p.on_fill(4);
  EXPECT_EQ(p.choose_victim(res, all), 5u);
  // No chunk of the step filled in it is evictable: the farthest next use, as always.
  auto not_filled_here = [](ChunkId c) { return c != 4 && c != 5 && c != 6; };
  EXPECT_EQ(p.choose_victim(res, not_filled_here), 11u);
  EXPECT_EQ(p.choose_victim(res, [](ChunkId c) { return c < 4; }), 2u);  // 3 is next-used in this step
  // The rule is for oversize steps only: a step that fits keeps the declared order.
  p.on_step_mode(false);
  EXPECT_EQ(p.choose_victim(res, all), 11u);
  EXPECT_EQ(p.choose_victim(res, [](ChunkId c) { return c != 11; }), 2u);
  // In the next step the previous step's fills are just chunks with a next use: step 3
  // current, chunk 6 is the farthest (the last of step 2 in the next pass), 4 (refilled
  // last) is not preferred any more.
  p.on_signal(2);
  p.on_step_mode(true);
  EXPECT_EQ(p.choose_victim(res, [](ChunkId c) { return c != 11; }), 6u);
  EXPECT_EQ(p.choose_victim(res, [](ChunkId c) { return c != 11 && c != 6; }), 5u);
  // Prefetch-side queries are unchanged by the mode.
  EXPECT_EQ(p.next_use(9), 0u);
}

TEST(SequencePolicy, InStepRuleNeverPicksAnUnevictableOrForeignChunk) {
  // Random oversize walks: the victim is always evictable and resident; when an evictable
  // chunk of the current step was filled in it, the victim is one of those (the earliest).
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    const uint32_t n = 20;
    std::vector<std::vector<ChunkId>> steps = {{0, 1}, {2, 3, 4, 5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14, 15, 16, 17}};
    DeclaredPolicy p(n, DeclaredSequence{steps}, false);
    p.on_signal(rng() % 4);
    const uint64_t cur = *p.cursor() + 1;
    p.on_step_mode(true);
    const auto& cs = steps[cur % 4];
    std::vector<uint64_t> when(n, 0);
    uint64_t t = 0;
    std::vector<ChunkId> res;
    for (ChunkId c = 0; c < n; ++c)
      if (rng() % 2) res.push_back(c);
    for (ChunkId c : cs)
      if (rng() % 2) {
        p.on_fill(c);
        when[c] = ++t;
      }
    std::vector<uint8_t> ok(n);
    for (auto& o : ok) o = rng() % 3 != 0;
    auto ev = [&](ChunkId c) { return ok[c] != 0; };
    const auto v = p.choose_victim(res, ev);
    std::optional<ChunkId> want;
    for (ChunkId c : res)
      if (ok[c] && when[c] && (!want || when[c] < when[*want])) want = c;
    if (want) {
      EXPECT_EQ(v, want);
    } else if (v) {
      EXPECT_TRUE(ok[*v]);
      EXPECT_NE(std::find(res.begin(), res.end(), *v), res.end());
    }
  }
}

TEST(RowChunks, TheChunksOfTheSelectedRows) {
  // A tensor at offset 1000 with 100-byte rows, 4096-byte chunks: row r is
  // [1000 + 100 r, 1100 + 100 r).
  const uint64_t off = 1000, rb = 100, bytes = 100 * rb;
  EXPECT_EQ(row_chunks(off, bytes, rb, {0}, 4096), (std::vector<ChunkId>{0}));
  EXPECT_EQ(row_chunks(off, bytes, rb, {30}, 4096), (std::vector<ChunkId>{0, 1}));  // [4000, 4100) straddles
  EXPECT_EQ(row_chunks(off, bytes, rb, {31, 99, 31, 70}, 4096), (std::vector<ChunkId>{1, 2}));
  EXPECT_EQ(row_chunks(off, bytes, rb, {}, 4096), (std::vector<ChunkId>{}));
  EXPECT_FALSE(row_chunks(off, bytes, rb, {100}, 4096).has_value());  // past the tensor
  EXPECT_FALSE(row_chunks(off, bytes, rb, {-1}, 4096).has_value());
  EXPECT_FALSE(row_chunks(off, bytes, 0, {1}, 4096).has_value());
}
