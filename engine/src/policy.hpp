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

namespace resid {

using ChunkId = uint32_t;
using Evictable = std::function<bool(ChunkId)>;
constexpr uint64_t kNoCursor = UINT64_MAX;

enum class PolicyKind { Lru, Declared, Prefetch, Zero };
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
};

std::unique_ptr<Policy> make_policy(PolicyKind kind, uint32_t chunks);

}  // namespace resid
