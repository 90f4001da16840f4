#include "policy/lru.hpp"

namespace resid {

void LruPolicy::on_access(ChunkId c) {
  if (c < last_use_.size()) last_use_[c] = ++clock_;
}

std::optional<ChunkId> LruPolicy::choose_victim(std::span<const ChunkId> resident,
                                                const Evictable& evictable) const {
  std::optional<ChunkId> best;
  for (ChunkId c : resident) {
    if (!evictable(c)) continue;
    // Ties (never-used chunks) break on the lower id so the choice is deterministic.
    if (!best || last_use_[c] < last_use_[*best] ||
        (last_use_[c] == last_use_[*best] && c < *best))
      best = c;
  }
  return best;
}

}  // namespace resid
