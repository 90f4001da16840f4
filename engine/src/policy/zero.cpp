#include "policy/zero.hpp"

namespace resid {

std::optional<ChunkId> ZeroPolicy::choose_victim(std::span<const ChunkId> resident,
                                                 const Evictable& evictable) const {
  std::optional<ChunkId> best;
  for (ChunkId c : resident)
    if (evictable(c) && (!best || c < *best)) best = c;  // any; lowest id for determinism
  return best;
}

}  // namespace resid
