// Room in the budget: victims by the policy among chunks without consumers or pins,
// evictions (the Plan's recycle, then MADV_DONTNEED); the oversize steps' mode (pins.hpp).
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "pager/pager.hpp"
#include "pager/pager_internal.hpp"

namespace resid {

void Pager::set_mode_locked(bool oversize) {
  sh_.pins.set_oversize(oversize, sh_.books, *sh_.plan);
  sh_.policy->on_step_mode(oversize);
}

PlanError Pager::try_recycle(ChunkId c) {
  if (c >= region_->chunks()) return PlanError::InvalidArgument;
  std::lock_guard lk(sh_.mu);
  if (sh_.books[c].state != ChunkState::Resident) return PlanError::InvalidTransition;
  const PlanError e = sh_.plan->recycle(static_cast<int32_t>(c));
  if (e != PlanError::None) {
    ++sh_.st.plan_recycle_refusals;
    return e;
  }
  // The Plan agreed (no consumer, no pin): the eviction goes ahead, slot already recycled.
  const uint64_t p0 = region_->first_page(c), np = region_->pages_in(c);
  for_each_mapped_run(sh_.books.holes(), p0, p0 + np, [&](uint64_t p, uint64_t q) {
    ::madvise(region_->base() + p * region_->geometry().page, (q - p) * region_->geometry().page, sh_.cfg.protect ? MADV_DONTNEED_LOCKED : MADV_DONTNEED);
  });
  mark_evicted_locked(c);
  return PlanError::None;
}

bool Pager::make_room_locked(ChunkId for_chunk) {
  auto evictable = [this, for_chunk](ChunkId v) {
    return v != for_chunk && sh_.books.evictable(v);
  };
  if (sh_.policy->evict_eagerly()) {
    // Keep nothing beyond need, except what was read ahead for a step still to come.
    auto eager = [this, for_chunk](ChunkId v) {
      return v != for_chunk && sh_.books.evictable(v) &&
             !sh_.books[v].prefetched_unused;
    };
    while (auto v = sh_.policy->choose_victim(sh_.books.resident(), eager))
      if (!evict_locked(*v)) return false;
  }
  // Demand and prefetch reads in flight hold their room already (read-ahead bundles take
  // theirs when they are published).
  while (sh_.books.occupied() + 1 > sh_.cfg.budget_chunks) {
    auto v = sh_.policy->choose_victim(sh_.books.resident(), evictable);
    if (!v) return false;
    if (!evict_locked(*v)) return false;
  }
  return true;
}

// The books after a chunk's pages were discarded: absent, out of the resident set, traced.
void Pager::mark_evicted_locked(ChunkId c) {
  sh_.books[c].state = ChunkState::Absent;
  sh_.books[c].prefetched_unused = 0;
  ra_next_step_ = 0;  // a coming step may need it read again: read-ahead looks again
  sh_.books.remove_resident(c);
  ++sh_.st.evictions;
  if (sh_.trace) sh_.trace->append(sh_.step, c, TraceKind::Eviction);
  if (sh_.cfg.eager_reconcile) region_->reconcile_locked();
}

bool Pager::evict_locked(ChunkId c) {
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
  const uint64_t p0 = region_->first_page(c), np = region_->pages_in(c);
  for (uint64_t p = p0; p < p0 + np;) {
    if (sh_.books.page_unmapped(p)) {
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < p0 + np && !sh_.books.page_unmapped(q)) ++q;
    // Cannot fail on a mapped range; a concurrent unmap only removes pages sooner.
    ::madvise(region_->base() + p * region_->geometry().page, (q - p) * region_->geometry().page, sh_.cfg.protect ? MADV_DONTNEED_LOCKED : MADV_DONTNEED);
    p = q;
  }
  mark_evicted_locked(c);
  return true;
}

}  // namespace resid
