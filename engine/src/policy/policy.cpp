#include "policy/policy.hpp"

#include <limits>

#include "policy/declared_cyclic.hpp"
#include "policy/lru.hpp"
#include "policy/zero.hpp"

namespace resid {

const char* to_string(PolicyKind k) {
  switch (k) {
    case PolicyKind::Lru: return "lru";
    case PolicyKind::Declared: return "declared";
    case PolicyKind::Prefetch: return "prefetch";
    case PolicyKind::Zero: return "zero";
  }
  return "?";
}

std::vector<ChunkId> Policy::prefetch_candidates(uint64_t, size_t) const { return {}; }

uint64_t Policy::next_use(ChunkId) const { return std::numeric_limits<uint64_t>::max(); }

std::unique_ptr<Policy> make_policy(PolicyKind kind, uint32_t chunks) {
  switch (kind) {
    case PolicyKind::Lru: return std::make_unique<LruPolicy>(chunks);
    case PolicyKind::Declared: return std::make_unique<DeclaredPolicy>(chunks, false);
    case PolicyKind::Prefetch: return std::make_unique<DeclaredPolicy>(chunks, true);
    case PolicyKind::Zero: return std::make_unique<ZeroPolicy>();
  }
  return nullptr;
}

}  // namespace resid
