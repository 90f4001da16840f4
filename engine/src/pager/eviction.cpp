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
#include "pager/pager_internal.hpp"

namespace resid {

void Pager::set_mode_locked(bool oversize) {
  pins_.set_oversize(oversize, books_, *plan_);
  policy_->on_step_mode(oversize);
}

PlanError Pager::try_recycle(ChunkId c) {
  if (c >= chunks_) return PlanError::InvalidArgument;
  std::lock_guard lk(mu_);
  if (books_[c].state != ChunkState::Resident) return PlanError::InvalidTransition;
  const PlanError e = plan_->recycle(static_cast<int32_t>(c));
  if (e != PlanError::None) {
    ++st_.plan_recycle_refusals;
    return e;
  }
  // The Plan agreed (no consumer, no pin): the eviction goes ahead, slot already recycled.
  const uint64_t p0 = first_page(c), np = pages_in(c);
  for_each_mapped_run(books_.holes(), p0, p0 + np, [&](uint64_t p, uint64_t q) {
    ::madvise(base_ + p * page_, (q - p) * page_, cfg_.protect ? MADV_DONTNEED_LOCKED : MADV_DONTNEED);
  });
  mark_evicted_locked(c);
  return PlanError::None;
}

bool Pager::make_room_locked(ChunkId for_chunk) {
  auto evictable = [this, for_chunk](ChunkId v) {
    return v != for_chunk && books_.evictable(v);
  };
  if (policy_->evict_eagerly()) {
    // Keep nothing beyond need, except what was read ahead for a step still to come.
    auto eager = [this, for_chunk](ChunkId v) {
      return v != for_chunk && books_.evictable(v) &&
             !books_[v].prefetched_unused;
    };
    while (auto v = policy_->choose_victim(books_.resident(), eager))
      if (!evict_locked(*v)) return false;
  }
  // Demand and prefetch reads in flight hold their room already (read-ahead bundles take
  // theirs when they are published).
  while (books_.occupied() + 1 > cfg_.budget_chunks) {
    auto v = policy_->choose_victim(books_.resident(), evictable);
    if (!v) return false;
    if (!evict_locked(*v)) return false;
  }
  return true;
}

// The books after a chunk's pages were discarded: absent, out of the resident set, traced.
void Pager::mark_evicted_locked(ChunkId c) {
  books_[c].state = ChunkState::Absent;
  books_[c].prefetched_unused = 0;
  ra_next_step_ = 0;  // a coming step may need it read again: read-ahead looks again
  books_.remove_resident(c);
  ++st_.evictions;
  if (trace_) trace_->append(step_, c, TraceKind::Eviction);
  if (cfg_.eager_reconcile) reconcile_locked();
}

bool Pager::evict_locked(ChunkId c) {
  // Under the lock, so no driver can enter the chunk between the choice and the discard.
  // The Plan recycles the chunk's slot first, and refuses a slot with a live consumer (or
  // pin): the pager's own rule, enforced by the Plan. A refusal here is a pager bug.
  if (const PlanError e = plan_->recycle(static_cast<int32_t>(c)); e != PlanError::None) {
    ++st_.plan_recycle_refusals;
    fail_closed_ = true;
    const uint32_t held = books_.held(c);
    fail_locked_with([&] {
      return "the Plan refused to recycle chunk " + std::to_string(c) + " (" + to_string(e) + ", " +
             std::to_string(held) + " consumer(s) and pin(s) in the pager's books)";
    });
    return false;
  }
  const uint64_t p0 = first_page(c), np = pages_in(c);
  for (uint64_t p = p0; p < p0 + np;) {
    if (books_.page_unmapped(p)) {
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < p0 + np && !books_.page_unmapped(q)) ++q;
    // Cannot fail on a mapped range; a concurrent unmap only removes pages sooner.
    ::madvise(base_ + p * page_, (q - p) * page_, cfg_.protect ? MADV_DONTNEED_LOCKED : MADV_DONTNEED);
    p = q;
  }
  mark_evicted_locked(c);
  return true;
}

}  // namespace resid
