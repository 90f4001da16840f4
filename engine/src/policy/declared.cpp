#include "policy/declared.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "policy/lru.hpp"
#include "policy/zero.hpp"

namespace resid {

DeclaredSequence DeclaredSequence::cyclic(uint32_t chunks) {
  DeclaredSequence s;
  s.steps.resize(chunks);
  for (ChunkId c = 0; c < chunks; ++c) s.steps[c] = {c};
  s.prefetch_current = true;
  return s;
}

DeclaredPolicy::DeclaredPolicy(uint32_t chunks, DeclaredSequence seq, bool prefetch)
    : n_(chunks),
      steps_(std::move(seq.steps)),
      prefetch_current_(seq.prefetch_current),
      occ_(chunks),
      prefetch_(prefetch),
      fill_step_(chunks, std::numeric_limits<uint64_t>::max()),
      fill_seq_(chunks, 0),
      consumed_step_(chunks, 0),
      seen_(chunks, 0) {
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

void DeclaredPolicy::on_signal(uint64_t cursor) {
  // Signals only move forward; a stale one must not rewind the policy's view.
  if (!cursor_ || cursor > *cursor_) cursor_ = cursor;
}

uint64_t DeclaredPolicy::next_use(ChunkId c) const {
  if (c >= n_ || occ_[c].empty() || steps_.empty()) return std::numeric_limits<uint64_t>::max();
  const size_t S = steps_.size();
  const uint64_t cur = next_step();
  const uint64_t p0 = step_start_[cur % S];
  const auto& o = occ_[c];
  // Consumed early in the current step: search from the step after it (header).
  const bool early = consumed_step_[c] == cur + 1;
  const uint64_t from = early ? (cur % S + 1 < S ? step_start_[cur % S + 1] : flat_) : p0;
  auto it = std::lower_bound(o.begin(), o.end(), from);
  return it != o.end() ? *it - p0 : o.front() + flat_ - p0;
}

void DeclaredPolicy::on_consumed(ChunkId c) {
  if (c < n_) consumed_step_[c] = next_step() + 1;
}

void DeclaredPolicy::on_fill(ChunkId c) {
  if (c >= n_) return;
  fill_step_[c] = next_step();
  fill_seq_[c] = ++fill_clock_;
}

std::optional<ChunkId> DeclaredPolicy::choose_victim(std::span<const ChunkId> resident,
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

std::vector<ChunkId> DeclaredPolicy::prefetch_candidates(uint64_t cursor, size_t n) const {
  std::vector<ChunkId> out;
  if (!prefetch_ || steps_.empty() || n == 0) return out;
  const size_t S = steps_.size();
  const uint64_t current = cursor == kNoCursor ? 0 : cursor + 1;
  const uint64_t stamp = ++seen_stamp_;  // seen_[c] == stamp: already a candidate (or current)
  if (!prefetch_current_)
    for (ChunkId c : steps_[current % S]) seen_[c] = stamp;
  for (size_t k = prefetch_current_ ? 0 : 1; k <= S && out.size() < n; ++k) {
    for (ChunkId c : steps_[(current + k) % S]) {
      if (seen_[c] == stamp) continue;
      seen_[c] = stamp;
      out.push_back(c);
      if (out.size() == n) break;
    }
  }
  return out;
}

std::unique_ptr<Policy> make_policy(PolicyKind kind, uint32_t chunks, DeclaredSequence seq, LayerGroups groups) {
  switch (kind) {
    case PolicyKind::Lru: return std::make_unique<LruPolicy>(chunks);
    case PolicyKind::Zero: return std::make_unique<ZeroPolicy>();
    case PolicyKind::Declared: return std::make_unique<DeclaredPolicy>(chunks, std::move(seq), false);
    case PolicyKind::Prefetch: return std::make_unique<DeclaredPolicy>(chunks, std::move(seq), true);
    case PolicyKind::LruKPerLayer: return std::make_unique<LruKPolicy>(chunks, std::move(groups));
  }
  return nullptr;
}

std::unique_ptr<Policy> make_policy(PolicyKind kind, uint32_t chunks) {
  return make_policy(kind, chunks, DeclaredSequence::cyclic(chunks));
}

}  // namespace resid
