// Fills: every fill is a bundle of the Plan moved by the one fill path (plan/fill.hpp);
// demand fills, arm E's prefetch and F's read-ahead bundles, their publication and books.
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

uint32_t Pager::free_windows() const {
  const size_t depth = source_->max_inflight(), inflight = fill_->inflight();
  const size_t room = inflight >= depth ? 0 : depth - inflight;
  return static_cast<uint32_t>(std::min(source_->windows_free(), room));
}

int Pager::begin_bundle_locked(FillKind kind, const ChunkId* cs, uint32_t n) {
  // The chunks are Absent and room was made for them: they become Filling, their slots
  // LOADING (one request: one bundle, published all-or-nothing).
  PlanResult<BundleHandle> r{};
  if (n <= req_slots_.size()) {
    for (uint32_t k = 0; k < n; ++k) {
      req_slots_[k] = static_cast<int32_t>(cs[k]);
      req_tags_[k] = cs[k];
    }
    r = sh_.plan->request_slots(req_slots_.data(), cs, req_tags_.data(), n);
  } else {
    r.error = PlanError::InvalidArgument;
  }
  if (!r.ok()) {
    const PlanError e = r.error;
    sh_.fail_locked_with([&] { return std::string("internal: the Plan refused the slots of chunk ") + std::to_string(cs[0]) +
                           " (" + to_string(e) + ")"; });
    return -1;
  }
  const int fi = fill_->track(r.value, cs, n);  // one chunk = one object of the Plan
  if (fi < 0) {
    sh_.fail_locked_with([] { return std::string("internal: no free fill record"); });
    return -1;
  }
  BundleRun& b = bundles_[static_cast<size_t>(fi)];
  b.live = true;
  b.kind = kind;
  b.n = n;
  b.ready = false;
  b.roomed = kind != FillKind::Readahead;
  b.target = 0;
  b.epoch = sh_.plan->epoch();
  b.chunks.assign(cs, cs + n);
  for (uint32_t k = 0; k < n; ++k) sh_.books[cs[k]].state = ChunkState::Filling;
  // Demand and prefetch reads take their room now; a read-ahead bundle waits in its windows
  // (paid from the budget) and takes room when it is published.
  if (kind != FillKind::Readahead) sh_.books.take_room(n);
  return fi;
}

bool Pager::reap_completions() {
  if (fill_->inflight() == 0) return false;
  const uint32_t n = fill_->reap(false);
  if (n > 0) snapshot_source_stats();
  return n > 0;
}

bool Pager::copy(uint32_t, const CopyOrder& order, const Completion& c, uint64_t submit_ns) {
  const ChunkId ch = sh_.manifest->piece(order.piece).object;  // one object per chunk
  const uint64_t len = region_->chunk_length(ch), got = c.extent.length;
  // The tail chunk publishes whole pages: zero the window's bytes past the file end.
  if (len > got) std::memset(c.data + got, 0, len - got);
  if (!region_->publish(ch, c.data, got)) return false;
  std::lock_guard lk(sh_.mu);
  fill_hist_.record(now_ns() - submit_ns);  // the read and the copy
  return true;
}

void Pager::snapshot_source_stats() {
  std::lock_guard lk(sh_.mu);
  snapshot_source_stats_locked();
}

// Copied, so readers never race the pager thread.
void Pager::snapshot_source_stats_locked() {
  src_stats_ = source_->stats();
  const FillCounters& fc = fill_->counters();
  sh_.st.content_checks = fc.content_checks;
  sh_.st.content_check_ns = fc.content_check_ns;
  sh_.st.content_mismatches = fc.content_mismatches;
}

void Pager::on_landed(uint32_t fi) {
  snapshot_source_stats();  // before the wake: a woken thread sees its fill in the stats
  BundleRun& b = bundles_[fi];
  if (b.kind == FillKind::Readahead) {
    b.ready = true;  // HOST_READY in its windows until its step begins
    ++readahead_ready_;
    publish_readahead();
    return;
  }
  publish_bundle(b, fi);
}

void Pager::on_rejected(uint32_t fi, PlanError kind, const Completion& c) {
  // A fatal rejection: the run fails closed (no further read, copy or publication), and
  // nothing of this bundle is ever copied.
  snapshot_source_stats();
  BundleRun& b = bundles_[fi];
  sh_.fail_closed = true;
  fill_->fail_closed();
  const RejectionRecord rej = sh_.plan->first_rejection();
  const ChunkId chunk = rej.kind == kind && rej.slot >= 0 ? static_cast<ChunkId>(rej.slot) : b.chunks[0];
  {
    std::lock_guard lk(sh_.mu);
    if (!rejection_.any) {
      rejection_ = PagerRejectionReport{true, kind, sh_.step, b.chunks, 0};
      rejected_bundle_ = static_cast<int>(fi);
    }
  }
  sh_.fail_with([&] {
    std::string m = std::string("rejected ") + to_string(kind) + " completion for chunk " + std::to_string(chunk) +
                    " (window " + std::to_string(c.window) + ", generation " +
                    std::to_string(rej.kind == kind ? rej.generation : 0) + ", epoch " +
                    std::to_string(rej.kind == kind ? rej.epoch : 0) + ")";
    if (!c.error.empty()) m += ": " + c.error;
    m += "; nothing of its bundle (" + std::to_string(b.n) + " chunk(s):";
    for (ChunkId x : b.chunks) m += ' ' + std::to_string(x);
    return m + ") was published";
  });
}

void Pager::on_dropped(uint32_t fi) { drop_bundle(bundles_[fi]); }

void Pager::on_internal(uint32_t fi, const char* what, PlanError e) {
  const ChunkId c = fi < bundles_.size() && !bundles_[fi].chunks.empty() ? bundles_[fi].chunks[0] : 0;
  sh_.fail_with([&] {
    return std::string("internal: ") + what + (fi < bundles_.size() ? " (bundle of chunk " + std::to_string(c) + ")" : "") +
           (e == PlanError::None ? "" : std::string(": ") + to_string(e));
  });
}

void Pager::publish_bundle(BundleRun& b, uint32_t fi) {
  // Every read of the bundle was accepted: copy (or move) each into the region, then publish
  // the bundle in one Plan transition, book it and wake the waiters.
  if (!fill_->land(fi)) {
    fill_->forget(fi);  // the rest is not copied; the Plan abandons its tickets at close
    drop_bundle(b);
    return;
  }
  std::unique_lock lk(sh_.mu);
  if (const PlanError e = fill_->publish(fi); e != PlanError::None) {
    lk.unlock();
    sh_.fail_with([&] { return "internal: the Plan refused to publish the bundle of chunk " + std::to_string(b.chunks[0]) +
                           " (" + to_string(e) + ")"; });
    fill_->forget(fi);
    drop_bundle(b);
    return;
  }
  if (b.epoch != sh_.plan->epoch()) ++sh_.st.reset.stale_published;  // requested before a reset: must never happen
  for (ChunkId c : b.chunks) book_fill_locked(c, b.kind);
  sh_.st.max_resident_chunks = std::max<uint64_t>(sh_.st.max_resident_chunks, sh_.books.resident().size());
  ++sh_.st.bundles_published;
  if (b.kind == FillKind::Readahead) ++sh_.st.readahead_bundles;
  if (static_cast<int>(fi) == rejected_bundle_) rejection_.bundle_chunks_published += b.n;
  if (sh_.cfg.eager_reconcile) region_->reconcile_locked();
  // The waiters' accounting; the wakes follow (DONTWAKE above: a woken thread finds the
  // fill in the books).
  const uint64_t t = now_ns();
  for (ChunkId c : b.chunks)
    if (sh_.books[c].state == ChunkState::Resident) wake_waiters_locked(c, t, b.kind);
  b.live = false;
  lk.unlock();
  for (ChunkId c : b.chunks) {
    if (sh_.books[c].mapped_pages == 0) continue;
    region_->wake_chunk(c);
    region_->maybe_collapse(c);
  }
}

// A published chunk in the pager's books: resident (or, unmapped meanwhile, gone at once),
// counted, traced, and told to the policy.
void Pager::book_fill_locked(ChunkId c, FillKind kind) {
  sh_.books.return_room(1);
  ++sh_.books[c].fills;
  if (kind == FillKind::Demand) {
    ++sh_.st.demand_fills;
    if (sh_.books[c].last_demand_step == static_cast<int64_t>(sh_.step)) ++sh_.st.in_step_refills;
    sh_.books[c].last_demand_step = static_cast<int64_t>(sh_.step);
    if (sh_.trace) sh_.trace->append(sh_.step, c, TraceKind::DemandFill);
  } else {
    ++sh_.st.prefetch_fills;
    if (kind == FillKind::Readahead) ++sh_.st.readahead_fills;
    if (sh_.trace) sh_.trace->append(sh_.step, c, TraceKind::PrefetchFill);
  }
  if (sh_.books[c].mapped_pages == 0) {
    // Unmapped while we read it: nothing to keep (its slot's version goes at once).
    sh_.books[c].state = ChunkState::Absent;
    sh_.books[c].prefetched_unused = 0;
    if (sh_.plan->recycle(static_cast<int32_t>(c)) == PlanError::ConsumersLive) ++sh_.st.plan_recycle_refusals;
    return;
  }
  sh_.books.add_resident(c);
  // A demand fill is an access; so is a read-ahead fill (for LRU: the access it stands in
  // for is one step away). Arm E's prefetch is not.
  if (kind != FillKind::Prefetch) sh_.policy->on_access(c);
  sh_.policy->on_fill(c);
}

void Pager::drop_bundle(BundleRun& b) {
  // A failed bundle: its chunks go back to Absent, poisoned (a rejected read is not retried:
  // the run has failed), their faults stay unserved.
  std::lock_guard lk(sh_.mu);
  const bool counted = b.kind != FillKind::Readahead || b.roomed;
  for (ChunkId c : b.chunks) {
    if (sh_.books[c].state == ChunkState::Filling) {
      sh_.books[c].state = ChunkState::Absent;
      if (counted) sh_.books.return_room(1);
    }
    sh_.books[c].prefetched_unused = 0;
    sh_.books[c].poisoned = 1;
  }
  if (b.ready) --readahead_ready_;
  b.ready = false;
  b.live = false;
}

void Pager::wake_waiters_locked(ChunkId c, uint64_t t, FillKind kind) {
  // Every fault message on chunk c is a compute thread blocked on it: its wait is exposed.
  const uintptr_t b = reinterpret_cast<uintptr_t>(region_->base());
  bool first = true;
  for (size_t i = 0; i < pending_.size();) {
    const PendingFault& f = pending_[i];
    if (f.addr < b || f.addr >= b + region_->geometry().registered_bytes || (f.addr - b) / sh_.cfg.chunk_size != c) {
      ++i;
      continue;
    }
    const uint64_t w = t > f.t_read_ns ? t - f.t_read_ns : 0;
    sh_.st.exposed_wait_ns += w;
    ++sh_.st.waited_faults;
    if (f.trigger) {
      fault_hist_.record(w);  // the demand fault that read the chunk
      demand_hist_.record(w);
    } else if (kind != FillKind::Demand && first) {
      fault_hist_.record(w);  // the first fault that waited for a read-ahead (or prefetch) in flight
      ++sh_.st.readahead_waits;
      first = false;
    } else {
      ++sh_.st.spurious_faults;  // another thread (or page) of a chunk being filled: woken, not refilled
    }
    pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
  }
}

std::span<const ChunkId> Pager::step_chunks_of(uint64_t step) {
  if (!sh_.cfg.step_chunks.empty()) return sh_.cfg.step_chunks[step % sh_.cfg.step_chunks.size()];
  one_chunk_ = static_cast<ChunkId>(step % region_->chunks());
  return {&one_chunk_, 1};
}

std::span<const ChunkId> Pager::readahead_chunks_of(uint64_t step) {
  if (!sh_.cfg.readahead_steps.empty()) return sh_.cfg.readahead_steps[step % sh_.cfg.readahead_steps.size()];
  return step_chunks_of(step);
}

bool Pager::maybe_readahead() {
  if (!sh_.cfg.readahead || sh_.fail_closed || sh_.failed || stopping_ || paused_) return false;
  // At most windows - 1 windows for read-ahead: one stays free for demand reads.
  const uint32_t windows = static_cast<uint32_t>(source_->window_count());
  const uint32_t cap = windows > 1 ? windows - 1 : 0;
  const uint32_t held = readahead_windows();
  if (held >= cap) return false;
  const uint32_t avail = std::min(free_windows(), cap - held);
  if (avail == 0) return false;
  int bi = -1;
  {
    std::lock_guard lk(sh_.mu);
    if (evictor_->take_evicted_locked()) ra_next_step_ = 0;  // an eviction: a coming step may need it again
    // Beyond one pass of steps every chunk is of a step before: nothing more to read.
    const uint64_t pass = sh_.cfg.step_chunks.empty() ? region_->chunks() : sh_.cfg.step_chunks.size();
    const uint64_t ahead = sh_.cfg.readahead_steps_ahead == 0 ? pass : sh_.cfg.readahead_steps_ahead;
    const uint64_t last = std::min(readahead_last_step_, sh_.step + std::min<uint64_t>(ahead, pass));
    uint64_t target = std::max(ra_next_step_, sh_.step + 1);
    if (target > last) return false;
    // The chunks of steps sh_.step .. target-1 are read by those steps (by their faults or their
    // own read-ahead bundles): marked, never read ahead for a later step.
    ++cur_stamp_;
    for (uint64_t s = sh_.step; s < target; ++s)
      for (ChunkId c : step_chunks_of(s)) cur_mark_[c] = cur_stamp_;
    // The first coming step with chunks to read: one bundle for it (its chunks absent, not
    // of an earlier step, their slots vacant), as many as the free windows take. A step is
    // covered when none is left to read; an eviction uncovers the steps again
    // (mark_evicted_locked).
    ra_chunks_.clear();
    for (; target <= last; ++target) {
      bool covered = true;
      for (ChunkId c : readahead_chunks_of(target)) {
        if (sh_.books[c].state != ChunkState::Absent || sh_.books[c].mapped_pages == 0 || sh_.books[c].poisoned || cur_mark_[c] == cur_stamp_ ||
            !slot_vacant_locked(c))
          continue;
        if (ra_chunks_.size() == avail) {
          covered = false;  // the rest wait for a window
          break;
        }
        ra_chunks_.push_back(c);
      }
      if (covered) {
        ra_next_step_ = target + 1;
        for (ChunkId c : step_chunks_of(target)) cur_mark_[c] = cur_stamp_;
      }
      if (!ra_chunks_.empty()) break;
    }
    if (ra_chunks_.empty()) return false;
    bi = begin_bundle_locked(FillKind::Readahead, ra_chunks_.data(), static_cast<uint32_t>(ra_chunks_.size()));
    if (bi < 0) return false;
    bundles_[static_cast<size_t>(bi)].target = target;
    sh_.st.readahead_max_ahead = std::max(sh_.st.readahead_max_ahead, target - sh_.step);
    for (ChunkId c : ra_chunks_) sh_.books[c].prefetched_unused = 1;
  }
  fill_->issue();
  return true;
}

// Windows held by read-ahead bundles (issued, not yet released).
uint32_t Pager::readahead_windows() const {
  uint32_t n = 0;
  for (size_t i = 0; i < bundles_.size(); ++i)
    if (bundles_[i].live && bundles_[i].kind == FillKind::Readahead) n += fill_->windows_held(static_cast<uint32_t>(i));
  return n;
}

bool Pager::publish_readahead() {
  // A read-ahead bundle whose reads all landed is published when its step has begun (or a
  // fault waits on one of its chunks: an access the declared steps did not foresee must
  // not wait for the step), with room made the way that step's demand faults would make it:
  // the policy's victims among chunks without consumers or pins, at the same cursor.
  if (sh_.fail_closed || readahead_ready_ == 0) return false;
  bool any = false;
  const uintptr_t base = reinterpret_cast<uintptr_t>(region_->base());
  for (BundleRun& b : bundles_) {
    const uint32_t fi = static_cast<uint32_t>(&b - bundles_.data());
    if (!b.live || b.kind != FillKind::Readahead || !b.ready || fill_->failed(fi)) continue;
    bool due;
    {
      std::lock_guard lk(sh_.mu);
      // Its step has begun and the step before has let go of its chunks (the adapter enters
      // the new step's chunks before it leaves the old ones): D's demand faults in that step
      // come after the leave too, so the victims are the same. At shutdown: published (and
      // then discarded), not abandoned.
      due = stopping_;
      if (!due && sh_.step >= b.target) {
        due = true;
        ++cur_stamp_;  // a chunk of both steps stays held by the new one
        for (ChunkId c : step_chunks_of(b.target)) cur_mark_[c] = cur_stamp_;
        for (ChunkId c : step_chunks_of(b.target - 1))
          if (sh_.books[c].consumers > 0 && cur_mark_[c] != cur_stamp_) {
            due = sh_.step > b.target;  // still held: wait for the leave (unless a later step began)
            break;
          }
      }
      for (size_t i = 0; !due && i < pending_.size(); ++i) {
        const uintptr_t a = pending_[i].addr;
        if (a < base || a >= base + region_->geometry().registered_bytes) continue;
        const ChunkId c = static_cast<ChunkId>((a - base) / sh_.cfg.chunk_size);
        due = std::find(b.chunks.begin(), b.chunks.end(), c) != b.chunks.end();
      }
      if (!due) continue;
      // Room for the whole bundle, or none taken (all-or-nothing).
      const uint32_t n = b.n;
      if (!evictor_->make_bundle_room_locked(n)) {
        ++sh_.st.readahead_no_room;  // waits for a leave (progress: the step fits)
        continue;
      }
      sh_.books.take_room(n);  // the room is theirs from here (publish_bundle books it)
      b.roomed = true;
    }
    b.ready = false;
    --readahead_ready_;
    publish_bundle(b, fi);
    any = true;
  }
  return any;
}

bool Pager::maybe_prefetch() {
  if (sh_.cfg.prefetch_depth == 0 || sh_.failed || free_windows() == 0) return false;
  ChunkId chosen = 0;
  bool found = false;
  int bi = -1;
  {
    std::lock_guard lk(sh_.mu);
    const auto cur = sh_.policy->cursor();
    candidates_ = sh_.policy->prefetch_candidates(cur ? *cur : kNoCursor, sh_.cfg.prefetch_depth);
    for (ChunkId c : candidates_) {
      // Skip what is there or on its way, what a driver is about to demand (its fault will
      // come), and holes.
      if (sh_.books[c].state != ChunkState::Absent || sh_.books[c].consumers > 0 || sh_.books[c].mapped_pages == 0 || sh_.books[c].poisoned ||
          !slot_vacant_locked(c))
        continue;
      found = evictor_->make_prefetch_room_locked(c);
      chosen = c;
      break;  // candidates are nearest first: if this one cannot go in, none farther can
    }
    if (!found) return false;
    bi = begin_bundle_locked(FillKind::Prefetch, &chosen, 1);
    if (bi < 0) return false;
    sh_.books[chosen].prefetched_unused = 1;
  }
  fill_->issue();
  return true;
}

}  // namespace resid
