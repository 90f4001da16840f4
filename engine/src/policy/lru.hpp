// Arm C: least recently used at access/fill granularity, the kernel's rule run by the
// pager. On a cyclic scan larger than the budget it evicts exactly the chunk needed soonest.
#pragma once

#include <vector>

#include "policy/policy.hpp"

namespace resid {

class LruPolicy final : public Policy {
 public:
  explicit LruPolicy(uint32_t chunks) : last_use_(chunks, 0) {}
  PolicyKind kind() const override { return PolicyKind::Lru; }
  void on_access(ChunkId c) override;
  void on_signal(uint64_t) override {}
  std::optional<ChunkId> choose_victim(std::span<const ChunkId> resident,
                                       const Evictable& evictable) const override;

 private:
  uint64_t clock_ = 0;
  std::vector<uint64_t> last_use_;  // logical time of the last access; 0 = never
};

}  // namespace resid
