// The llama adapter's objects: logical units of weights named by model semantics, laid over
// the chunks of the pager region (docs/run-contract.md, `residctl generate`).
//
//   embd      the token embedding (token_embd.*)
//   layer.N   every tensor blk.N.*, whatever the family puts there (biases, QK norms, post
//             norms, fused qkv or gate-up, a router, experts, shared experts); plus the
//             tensors shared by every layer (rope_freqs, rope_factors_long/short)
//   output    output_norm.* and output.*; plus token_embd.* when the output projection is
//             tied to the token embedding (no output.weight in the file)
//
// One pass of the model (the prefill, and every decode pass) visits the objects in this
// compute order; the declared sequence of object steps is that order, repeated. Each object
// covers the chunks its tensors' file extents overlap.
//
// A Mixture-of-Experts layer (blk.N.*_exps.*: the experts stacked along the last dimension,
// one equal slice each) is two kinds of object inside its step: the dense object
// `layer.N.dense` (attention, norms, the router, shared experts: every tensor of the layer
// not stacked per expert) and one object per expert, `layer.N.expert.E`: its slice of each
// of the layer's expert tensors (gate, up, down, ...), as canonical file extents. The step
// `layer.N` computes the dense object and the experts its router picks (the routes are known
// only once the router has run, inside the step): `routed_chunks` is what such a step reads.
// Pure logic over a tensor list (the GGUF reader lives in llama_adapter), so everything here
// is unit-testable without llama.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/types.hpp"
#include "pager/signal_audit.hpp"

namespace resid {

struct TensorInfo {
  std::string name;
  std::string type;     // ggml type name ("Q4_1", "F32", ...)
  uint64_t offset = 0;  // absolute file offset (GGUF data offset + tensor offset)
  uint64_t bytes = 0;
  std::vector<int64_t> shape;  // ne[0..n_dims), when the reader knows it (empty: unknown)
};

enum class ObjectKind { Embd, Layer, Expert, Output };
const char* to_string(ObjectKind k);

// One expert's slice of one of its layer's expert tensors.
struct ExpertSlice {
  uint32_t tensor = 0;    // index into Manifest::tensors
  std::string component;  // what the tensor is: "gate", "up", "down", "gate_up", "up.bias", ...
  uint64_t offset = 0;    // absolute file offset of the slice
  uint64_t bytes = 0;
};

// layer.N.expert.E: one expert of a MoE layer, computed inside the layer's step.
struct ExpertObject {
  std::string name;                  // "layer.N.expert.E"
  int layer = -1;
  uint32_t expert = 0;
  uint32_t step = 0;                 // the object (layer.N) whose step computes it
  std::vector<ExpertSlice> slices;   // by file offset
  uint64_t bytes = 0;
  std::vector<ChunkId> chunks;       // chunks its slices overlap, ascending
};

struct ModelObject {
  std::string name;  // "embd", "layer.N", "output"
  ObjectKind kind = ObjectKind::Layer;
  int layer = -1;                       // N for layer.N, -1 otherwise
  std::vector<uint32_t> tensors;        // indexes into Manifest::tensors, by offset
  std::vector<uint32_t> expert_tensors; // those stacked per expert (*_exps.*), when n_expert > 0
  std::vector<uint32_t> dense_tensors;  // a MoE layer: its other tensors (the layer.N.dense object)
  std::vector<uint32_t> experts;        // a MoE layer: its expert objects (Manifest::experts), by expert
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // merged [offset, end) union, sorted
  uint64_t bytes = 0;                   // sum of its tensors' bytes
  std::vector<ChunkId> chunks;          // chunks the extents overlap, ascending
};

struct Manifest {
  uint64_t file_bytes = 0;
  uint64_t data_offset = 0;
  uint64_t chunk_size = 0;
  uint32_t chunks = 0;                  // ceil(file_bytes / chunk_size)
  bool tied_output = false;
  uint32_t n_layer = 0;
  uint32_t n_expert = 0;                // experts per MoE layer (0: a dense model)
  std::vector<TensorInfo> tensors;      // sorted by offset
  std::vector<ModelObject> objects;     // the declared step order: embd, layer.0.., output
  std::vector<ExpertObject> experts;    // every MoE layer's expert objects, by layer then expert

  // Per object step (index = step within a pass), the chunks it touches.
  std::vector<std::vector<ChunkId>> step_chunks() const;
  uint32_t steps_per_pass() const { return static_cast<uint32_t>(objects.size()); }
  uint32_t max_step_chunks() const;
  // Object indexes that contain chunk c (a chunk may be shared by neighbouring objects).
  std::vector<uint32_t> objects_of_chunk(ChunkId c) const;
  // The tensor whose extent holds file offset `off`, if any.
  std::optional<uint32_t> tensor_at(uint64_t off) const;
  // Does object `obj` contain tensor `t`?
  bool object_has_tensor(uint32_t obj, uint32_t t) const;
  // The chunks object `obj` reads when its router picked `experts` (ids, any order, repeats
  // allowed): its dense object whole, and those expert objects. Ascending. nullopt for an
  // object without expert objects or an id outside 0..n_expert-1.
  std::optional<std::vector<ChunkId>> routed_chunks(uint32_t obj, const std::vector<int32_t>& picked) const;
  // The object of layer N.
  std::optional<uint32_t> layer_object(int layer) const;
  // The expert object (index into experts) of expert `expert` of layer N.
  std::optional<uint32_t> expert_object(int layer, int32_t expert) const;
  // objects.json
  nlohmann::json to_json() const;

  std::vector<std::vector<uint8_t>> membership;  // [object][tensor], set by build_manifest
};

// Builds the manifest. Throws InputError (exit 2) when a tensor lies outside the file
// (a truncated model), tensors overlap, a tensor belongs to no object, a layer is missing,
// or there is no token embedding; and when the expert tensors do not match the metadata
// (`expert_count_key`, e.g. "qwen2moe.expert_count", gave `n_expert`): an expert tensor in a
// model whose metadata gives no expert count, one whose last dimension is not n_expert, or
// one that does not split into n_expert equal slices (each error names the tensor). Tensors
// named rope_freqs.* / rope_factors_* (one tensor read by every layer) are put into every
// layer object.
Manifest build_manifest(std::vector<TensorInfo> tensors, uint64_t file_bytes, uint64_t data_offset,
                        uint64_t chunk_size, uint32_t n_expert = 0,
                        const std::string& expert_count_key = "expert_count");

// The first and last chunk of tensor t's file extent (t.bytes > 0).
inline std::pair<ChunkId, ChunkId> tensor_chunk_range(const TensorInfo& t, uint64_t chunk_size) {
  return {static_cast<ChunkId>(t.offset / chunk_size), static_cast<ChunkId>((t.offset + t.bytes - 1) / chunk_size)};
}

// The chunks holding rows `rows` of a row-major tensor at file offset `tensor_offset` of
// `tensor_bytes` bytes, row r being [tensor_offset + r * row_bytes, + row_bytes) (row_bytes:
// the row size of the tensor's type and shape, ggml_row_size(type, ne[0])): ascending,
// unique. nullopt when a row id is negative or a row lies outside the tensor. This is what
// GET_ROWS on the token embedding reads (the `embd` step's access records).
std::optional<std::vector<ChunkId>> row_chunks(uint64_t tensor_offset, uint64_t tensor_bytes, uint64_t row_bytes,
                                               const std::vector<int32_t>& rows, uint64_t chunk_size);

// The generate startup audit: after the prefill and the first two decode passes every
// declared chunk must have received a consumption signal. Returns the run error naming the
// first chunk that did not (and the objects it belongs to), or nullopt.
std::optional<std::string> startup_audit_error(const SignalAudit& audit, const Manifest& m,
                                               uint32_t passes_checked);

}  // namespace resid
