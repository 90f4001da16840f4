// Policy: which resident chunk to evict and which chunks to fill ahead. Pure logic over
// chunk ids and a consumption cursor, so every engine is unit-testable without a kernel.
//
// Cursor convention (shared by all engines): signal(s) means the chunk of global step s
// (chunk s mod N of the declared cyclic order) has been consumed, so the next step to
// come is s+1. Before any signal the next step is 0.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/types.hpp"

namespace resid {

using Evictable = std::function<bool(ChunkId)>;
constexpr uint64_t kNoCursor = UINT64_MAX;

enum class PolicyKind { Lru, Declared, Prefetch, Zero, LruKPerLayer };
const char* to_string(PolicyKind k);

class Policy {
 public:
  virtual ~Policy() = default;
  virtual PolicyKind kind() const = 0;

  // A chunk was accessed or filled (the recency granularity of LRU).
  virtual void on_access(ChunkId c) = 0;
  // The workload consumed the chunk of global step `cursor`.
  virtual void on_signal(uint64_t cursor) = 0;
  // A resident chunk for which evictable(c) holds, or nullopt if there is none.
  virtual std::optional<ChunkId> choose_victim(std::span<const ChunkId> resident,
                                               const Evictable& evictable) const = 0;
  // Up to n chunks worth filling after `cursor`, nearest first (empty: no prefetch).
  // Pass kNoCursor before the first signal: cursor + 1 then wraps to step 0.
  virtual std::vector<ChunkId> prefetch_candidates(uint64_t cursor, size_t n) const;
  // Steps from the next step to this chunk's next use; UINT64_MAX when unknown.
  virtual uint64_t next_use(ChunkId c) const;
  // Keep nothing beyond need: evict every evictable chunk before a fill.
  virtual bool evict_eagerly() const { return false; }
  // The cursor as last signalled (nullopt before the first signal).
  virtual std::optional<uint64_t> cursor() const { return std::nullopt; }

  // Oversize steps (generate): a step whose chunks cannot all stay resident at this budget
  // runs without live consumers on its chunks (the pager pins only the chunk each compute
  // thread last faulted on), so chunks of the current step are evicted while it runs.
  // The pager tells the policy whether the step now current is oversize (after the step
  // boundary, before any fill of the step) and about every fill (demand or prefetch).
  virtual void on_step_mode(bool oversize) { (void)oversize; }
  virtual void on_fill(ChunkId c) { (void)c; }
  // Tensor signals (generate --consumption tensor): the step being computed is done with
  // chunk c (every tensor of the step covering it was consumed), before the step ends.
  virtual void on_consumed(ChunkId c) { (void)c; }
};

// make_policy (policy/declared.hpp) builds every engine.

}  // namespace resid
