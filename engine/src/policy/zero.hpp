// No reuse: evict every resident chunk nobody is consuming, so each access refills its
// chunk. The floor of what any reuse policy must beat.
#pragma once

#include "policy/policy.hpp"

namespace resid {

class ZeroPolicy final : public Policy {
 public:
  PolicyKind kind() const override { return PolicyKind::Zero; }
  void on_access(ChunkId) override {}
  void on_signal(uint64_t) override {}
  std::optional<ChunkId> choose_victim(std::span<const ChunkId> resident,
                                       const Evictable& evictable) const override;
  bool evict_eagerly() const override { return true; }
};

}  // namespace resid
