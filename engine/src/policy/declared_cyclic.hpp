// Arm D: the declared cyclic order 0..N-1 plus the consumption cursor give every chunk's
// next use; evict the evictable chunk used farthest in the future (Belady on a cyclic
// scan). Arm E (prefetch=true) additionally names the next declared chunks as prefetch
// candidates.
#pragma once

#include "policy/policy.hpp"

namespace resid {

class DeclaredPolicy final : public Policy {
 public:
  DeclaredPolicy(uint32_t chunks, bool prefetch) : n_(chunks), prefetch_(prefetch) {}
  PolicyKind kind() const override { return prefetch_ ? PolicyKind::Prefetch : PolicyKind::Declared; }
  void on_access(ChunkId) override {}
  void on_signal(uint64_t cursor) override;
  std::optional<ChunkId> choose_victim(std::span<const ChunkId> resident,
                                       const Evictable& evictable) const override;
  std::vector<ChunkId> prefetch_candidates(uint64_t cursor, size_t n) const override;
  // Distance from the next step: the chunk at the next step is 0; the chunk just consumed
  // is N-1 (its next use is N steps after its consumption).
  uint64_t next_use(ChunkId c) const override;
  std::optional<uint64_t> cursor() const override { return cursor_; }

 private:
  uint64_t next_step() const { return cursor_ ? *cursor_ + 1 : 0; }

  uint32_t n_;
  bool prefetch_;
  std::optional<uint64_t> cursor_;
};

}  // namespace resid
