#include "policy/declared_cyclic.hpp"

namespace resid {

void DeclaredPolicy::on_signal(uint64_t cursor) {
  // Signals only move forward; a stale one (a racing signal source) must not rewind
  // the policy's view of the sequence.
  if (!cursor_ || cursor > *cursor_) cursor_ = cursor;
}

uint64_t DeclaredPolicy::next_use(ChunkId c) const {
  if (n_ == 0) return 0;
  const uint64_t p = next_step() % n_;
  return (static_cast<uint64_t>(c) + n_ - p) % n_;
}

std::optional<ChunkId> DeclaredPolicy::choose_victim(std::span<const ChunkId> resident,
                                                     const Evictable& evictable) const {
  std::optional<ChunkId> best;
  uint64_t best_d = 0;
  for (ChunkId c : resident) {
    if (!evictable(c)) continue;
    const uint64_t d = next_use(c);  // distinct per chunk, so no ties
    if (!best || d > best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::vector<ChunkId> DeclaredPolicy::prefetch_candidates(uint64_t cursor, size_t n) const {
  std::vector<ChunkId> out;
  if (!prefetch_ || n_ == 0) return out;
  const size_t k = n < n_ ? n : n_;
  out.reserve(k);
  for (size_t i = 0; i < k; ++i) out.push_back(static_cast<ChunkId>((cursor + 1 + i) % n_));
  return out;
}

}  // namespace resid
