// Per-layer LRU-k (docs/design.md `lru_k_per_layer`, arm pager-lru-k; reference 004 A.5's
// "independent per-layer LRU32"): every chunk belongs to one group (generate: the layer of
// the llama adapter's first layer object that covers it; chunks of no layer, the embedding
// and the output, form one group of their own), and each group keeps at most K of its
// chunks resident by recency.
//
// The rule, at every victim choice: count the resident chunks of each group; among the
// evictable resident chunks of the groups holding more than K, the least recently used one
// (recency as LruPolicy: access and fill, ties on the lower id); when no such chunk exists,
// the least recently used evictable resident chunk of any group. Never a chunk for which
// evictable(c) is false. With K at least every group's size no group exceeds K and the
// choice is LruPolicy's.
//
// Why: a cyclic pass larger than the budget defeats plain LRU (it evicts exactly the chunk
// needed soonest, so every access misses); capping each layer at K lets the last K chunks
// of every layer survive until the next pass.
#pragma once

#include <vector>

#include "policy/lru.hpp"

namespace resid {

// The policy's construction input: the group of every chunk (ids 0..groups-1) and K.
struct LayerGroups {
  std::vector<uint32_t> group_of;  // one entry per chunk
  uint32_t k = 0;                  // at least 1
};

class LruKPolicy final : public Policy {
 public:
  // groups.group_of.size() == chunks and groups.k >= 1 (std::invalid_argument otherwise).
  LruKPolicy(uint32_t chunks, LayerGroups groups);
  PolicyKind kind() const override { return PolicyKind::LruKPerLayer; }
  void on_access(ChunkId c) override { lru_.on_access(c); }
  void on_signal(uint64_t) override {}
  std::optional<ChunkId> choose_victim(std::span<const ChunkId> resident,
                                       const Evictable& evictable) const override;
  uint32_t k() const { return k_; }

 private:
  LruPolicy lru_;
  std::vector<uint32_t> group_of_;
  uint32_t k_;
  mutable std::vector<uint32_t> count_;  // choose_victim's scratch: resident chunks per group
};

}  // namespace resid
