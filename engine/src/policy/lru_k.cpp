#include "policy/lru_k.hpp"

#include <algorithm>
#include <stdexcept>

namespace resid {

LruKPolicy::LruKPolicy(uint32_t chunks, LayerGroups groups)
    : lru_(chunks), group_of_(std::move(groups.group_of)), k_(groups.k) {
  if (group_of_.size() != chunks) throw std::invalid_argument("lru_k_per_layer: one group per chunk");
  if (k_ == 0) throw std::invalid_argument("lru_k_per_layer: K must be at least 1");
  const uint32_t n = group_of_.empty() ? 0 : *std::max_element(group_of_.begin(), group_of_.end()) + 1;
  count_.assign(n, 0);
}

std::optional<ChunkId> LruKPolicy::choose_victim(std::span<const ChunkId> resident,
                                                 const Evictable& evictable) const {
  std::fill(count_.begin(), count_.end(), 0);
  for (ChunkId c : resident) ++count_[group_of_[c]];
  const auto over = lru_.choose_victim(
      resident, [&](ChunkId c) { return count_[group_of_[c]] > k_ && evictable(c); });
  return over ? over : lru_.choose_victim(resident, evictable);
}

}  // namespace resid
