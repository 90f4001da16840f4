// Room in the budget: victims by the policy among chunks without consumers or pins,
// evictions (the Plan's recycle, then MADV_DONTNEED); the oversize steps' mode (pins.hpp).
#include "pager/evictor.hpp"

#include <string>

namespace resid {

void Evictor::set_mode_locked(bool oversize) {
  sh_.pins.set_oversize(oversize, sh_.books, *sh_.plan);
  sh_.policy->on_step_mode(oversize);
}

PlanError Evictor::try_recycle_locked(ChunkId c) {
  if (sh_.books[c].state != ChunkState::Resident) return PlanError::InvalidTransition;
  const PlanError e = sh_.plan->recycle(static_cast<int32_t>(c));
  if (e != PlanError::None) {
    ++sh_.st.plan_recycle_refusals;
    return e;
  }
  // The Plan agreed (no consumer, no pin): the eviction goes ahead, slot already recycled.
  region_.discard(c);
  mark_evicted_locked(c);
  return PlanError::None;
}

bool Evictor::make_room_locked(ChunkId for_chunk) {
  ChunkBooks& books = sh_.books;
  Policy& policy = *sh_.policy;
  auto evictable = [&books, for_chunk](ChunkId v) { return v != for_chunk && books.evictable(v); };
  if (policy.evict_eagerly()) {
    // Keep nothing beyond need, except what was read ahead for a step still to come.
    auto eager = [&books, for_chunk](ChunkId v) {
      return v != for_chunk && books.evictable(v) && !books[v].prefetched_unused;
    };
    while (auto v = policy.choose_victim(books.resident(), eager))
      if (!evict_locked(*v)) return false;
  }
  // Demand and prefetch reads in flight hold their room already (read-ahead bundles take
  // theirs when they are published).
  while (books.occupied() + 1 > sh_.cfg.budget_chunks) {
    auto v = policy.choose_victim(books.resident(), evictable);
    if (!v) return false;
    if (!evict_locked(*v)) return false;
  }
  return true;
}

bool Evictor::make_bundle_room_locked(uint32_t n) {
  ChunkBooks& books = sh_.books;
  Policy& policy = *sh_.policy;
  auto not_read_ahead = [&books](ChunkId v) { return books.evictable(v) && !books[v].prefetched_unused; };
  auto any = [&books](ChunkId v) { return books.evictable(v); };
  while (books.occupied() + n > sh_.cfg.budget_chunks) {
    auto v = policy.choose_victim(books.resident(), not_read_ahead);
    if (!v) v = policy.choose_victim(books.resident(), any);
    if (!v || !evict_locked(*v)) return false;
  }
  return true;
}

bool Evictor::make_prefetch_room_locked(ChunkId candidate) {
  ChunkBooks& books = sh_.books;
  Policy& policy = *sh_.policy;
  if (books.occupied() < sh_.cfg.budget_chunks) return true;
  auto v = policy.choose_victim(books.resident(), [&books](ChunkId x) { return books.evictable(x); });
  return v && policy.next_use(*v) > policy.next_use(candidate) && evict_locked(*v);
}

// The books after a chunk's pages were discarded: absent, out of the resident set, traced.
void Evictor::mark_evicted_locked(ChunkId c) {
  sh_.books[c].state = ChunkState::Absent;
  sh_.books[c].prefetched_unused = 0;
  evicted_ = true;  // a coming step may need it read again: read-ahead looks again
  sh_.books.remove_resident(c);
  ++sh_.st.evictions;
  if (sh_.trace) sh_.trace->append(sh_.step, c, TraceKind::Eviction);
  if (sh_.cfg.eager_reconcile) region_.reconcile_locked();
}

bool Evictor::evict_locked(ChunkId c) {
  // Under the lock, so no driver can enter the chunk between the choice and the discard.
  // The Plan recycles the chunk's slot first, and refuses a slot with a live consumer (or
  // pin): the pager's own rule, enforced by the Plan. A refusal here is a pager bug.
  if (const PlanError e = sh_.plan->recycle(static_cast<int32_t>(c)); e != PlanError::None) {
    ++sh_.st.plan_recycle_refusals;
    sh_.fail_closed = true;
    const uint32_t held = sh_.books.held(c);
    sh_.fail_locked_with([&] {
      return "the Plan refused to recycle chunk " + std::to_string(c) + " (" + to_string(e) + ", " +
             std::to_string(held) + " consumer(s) and pin(s) in the pager's books)";
    });
    return false;
  }
  region_.discard(c);
  mark_evicted_locked(c);
  return true;
}

}  // namespace resid
