// Room in the budget: victims by the policy among chunks without consumers or pins,
// evictions (the Plan's recycle, then MADV_DONTNEED), and the oversize steps' pins.
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
  clear_pins_locked();
  oversize_ = oversize;
  policy_->on_step_mode(oversize);
}

void Pager::clear_pins_locked() {
  for (const auto& [tid, c] : thread_pins_) {
    --books_[c].pins;
    plan_->unhold(static_cast<int32_t>(c));
  }
  thread_pins_.clear();
}

void Pager::pin_locked(uint32_t tid, ChunkId c) {
  // A thread's pins: the last kPinsPerThread distinct chunks it faulted on (it is blocked on
  // the newest, so it reads nothing else now). Two, because a thread can need two chunks at
  // once: a matrix-product tile reads several rows block by block, interleaved (llamafile's
  // tinyBLAS Q8_0 kernel: 4 rows per tile, 32 weights of each row in turn), and a tile whose
  // rows straddle a chunk boundary alternates between the two chunks; with one pin the
  // chunks evict each other on every block. thread_pins_ is ordered oldest first.
  size_t mine = 0, oldest_mine = SIZE_MAX;
  for (size_t i = 0; i < thread_pins_.size(); ++i) {
    if (thread_pins_[i].first != tid) continue;
    if (thread_pins_[i].second == c) {  // already pinned by this thread: now its newest
      auto e = thread_pins_[i];
      thread_pins_.erase(thread_pins_.begin() + static_cast<ptrdiff_t>(i));
      thread_pins_.push_back(e);
      return;
    }
    if (mine++ == 0) oldest_mine = i;
  }
  if (mine >= kPinsPerThread) {
    --books_[thread_pins_[oldest_mine].second].pins;
    plan_->unhold(static_cast<int32_t>(thread_pins_[oldest_mine].second));
    thread_pins_.erase(thread_pins_.begin() + static_cast<ptrdiff_t>(oldest_mine));
    ++st_.pin_moves;
  } else if (mine == 0 && cfg_.max_pins > 0) {
    // A new thread beyond --threads (unexpected): the least recently faulting thread's pins go.
    // (Counted in place: the fault path does not allocate.)
    auto first_of = [&](size_t i) {
      for (size_t k = 0; k < i; ++k)
        if (thread_pins_[k].first == thread_pins_[i].first) return false;
      return true;
    };
    size_t threads = 0;
    for (size_t i = 0; i < thread_pins_.size(); ++i) threads += first_of(i);
    if (threads >= cfg_.max_pins) {
      // The least recent thread is the one whose newest pin is oldest.
      uint32_t victim = thread_pins_.front().first;
      size_t victim_newest = SIZE_MAX;
      for (size_t j = 0; j < thread_pins_.size(); ++j) {
        if (!first_of(j)) continue;
        const uint32_t t = thread_pins_[j].first;
        size_t newest = 0;
        for (size_t i = 0; i < thread_pins_.size(); ++i)
          if (thread_pins_[i].first == t) newest = i;
        if (newest < victim_newest) {
          victim_newest = newest;
          victim = t;
        }
      }
      for (size_t i = thread_pins_.size(); i-- > 0;)
        if (thread_pins_[i].first == victim) {
          --books_[thread_pins_[i].second].pins;
          plan_->unhold(static_cast<int32_t>(thread_pins_[i].second));
          thread_pins_.erase(thread_pins_.begin() + static_cast<ptrdiff_t>(i));
        }
    }
  }
  thread_pins_.emplace_back(tid, c);
  ++books_[c].pins;
  plan_->hold(static_cast<int32_t>(c));
  st_.max_pins = std::max<uint64_t>(st_.max_pins, thread_pins_.size());
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
