#include "policy/declared.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "policy/lru.hpp"
#include "policy/zero.hpp"

namespace resid {

SequenceDeclaredPolicy::SequenceDeclaredPolicy(uint32_t chunks, std::vector<std::vector<ChunkId>> steps,
                                               bool prefetch)
    : n_(chunks),
      steps_(std::move(steps)),
      occ_(chunks),
      prefetch_(prefetch),
      fill_step_(chunks, std::numeric_limits<uint64_t>::max()),
      fill_seq_(chunks, 0) {
  step_start_.reserve(steps_.size());
  for (auto& s : steps_) {
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    step_start_.push_back(flat_);
    for (ChunkId c : s) {
      if (c >= n_) throw std::out_of_range("declared sequence: chunk out of range");
      occ_[c].push_back(flat_++);
    }
  }
}

void SequenceDeclaredPolicy::on_signal(uint64_t cursor) {
  // Signals only move forward; a stale one must not rewind the policy's view.
  if (!cursor_ || cursor > *cursor_) cursor_ = cursor;
}

uint64_t SequenceDeclaredPolicy::next_use(ChunkId c) const {
  if (c >= n_ || occ_[c].empty() || steps_.empty()) return std::numeric_limits<uint64_t>::max();
  const uint64_t p0 = step_start_[next_step() % steps_.size()];
  const auto& o = occ_[c];
  auto it = std::lower_bound(o.begin(), o.end(), p0);
  return it != o.end() ? *it - p0 : o.front() + flat_ - p0;
}

void SequenceDeclaredPolicy::on_fill(ChunkId c) {
  if (c >= n_) return;
  fill_step_[c] = next_step();
  fill_seq_[c] = ++fill_clock_;
}

std::optional<ChunkId> SequenceDeclaredPolicy::choose_victim(std::span<const ChunkId> resident,
                                                             const Evictable& evictable) const {
  if (oversize_ && !steps_.empty()) {
    // The in-step rule (header): the chunk of the current step filled earliest in it.
    const uint64_t cur = next_step();
    const auto& cs = steps_[cur % steps_.size()];
    std::optional<ChunkId> first;
    for (ChunkId c : resident) {
      if (c >= n_ || fill_step_[c] != cur || !evictable(c)) continue;
      if (!std::binary_search(cs.begin(), cs.end(), c)) continue;
      if (!first || fill_seq_[c] < fill_seq_[*first]) first = c;
    }
    if (first) return first;
  }
  std::optional<ChunkId> best;
  uint64_t best_d = 0;
  for (ChunkId c : resident) {
    if (!evictable(c)) continue;
    const uint64_t d = next_use(c);
    // Distinct for chunks in the sequence; unused chunks tie at UINT64_MAX: lowest id.
    if (!best || d > best_d || (d == best_d && c < *best)) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::vector<ChunkId> SequenceDeclaredPolicy::prefetch_candidates(uint64_t cursor, size_t n) const {
  std::vector<ChunkId> out;
  if (!prefetch_ || steps_.empty() || n == 0) return out;
  const size_t S = steps_.size();
  const uint64_t current = cursor == kNoCursor ? 0 : cursor + 1;
  const auto& cur = steps_[current % S];
  std::vector<uint8_t> seen(n_, 0);
  for (ChunkId c : cur) seen[c] = 1;
  for (size_t k = 1; k <= S && out.size() < n; ++k) {
    for (ChunkId c : steps_[(current + k) % S]) {
      if (seen[c]) continue;
      seen[c] = 1;
      out.push_back(c);
      if (out.size() == n) break;
    }
  }
  return out;
}

std::unique_ptr<Policy> make_sequence_policy(PolicyKind kind, uint32_t chunks,
                                             const std::vector<std::vector<ChunkId>>& steps) {
  switch (kind) {
    case PolicyKind::Lru: return std::make_unique<LruPolicy>(chunks);
    case PolicyKind::Zero: return std::make_unique<ZeroPolicy>();
    case PolicyKind::Declared: return std::make_unique<SequenceDeclaredPolicy>(chunks, steps, false);
    case PolicyKind::Prefetch: return std::make_unique<SequenceDeclaredPolicy>(chunks, steps, true);
  }
  return nullptr;
}

}  // namespace resid
