#include "policy/policy.hpp"

#include <limits>

namespace resid {

const char* to_string(PolicyKind k) {
  switch (k) {
    case PolicyKind::Lru: return "lru";
    case PolicyKind::Declared: return "declared";
    case PolicyKind::Prefetch: return "prefetch";
    case PolicyKind::Zero: return "zero";
    case PolicyKind::LruKPerLayer: return "lru_k_per_layer";
  }
  return "?";
}

std::vector<ChunkId> Policy::prefetch_candidates(uint64_t, size_t) const { return {}; }

uint64_t Policy::next_use(ChunkId) const { return std::numeric_limits<uint64_t>::max(); }

}  // namespace resid
