// The filler's reads ahead of demand: F's read-ahead bundles (one per coming step, published
// when the step begins) and E's prefetch (the Policy's candidates).
#include <algorithm>

#include "pager/filler.hpp"

namespace resid {

std::span<const ChunkId> Filler::step_chunks_of(uint64_t step) {
  if (!sh_.cfg.step_chunks.empty()) return sh_.cfg.step_chunks[step % sh_.cfg.step_chunks.size()];
  one_chunk_ = static_cast<ChunkId>(step % region_.chunks());
  return {&one_chunk_, 1};
}

std::span<const ChunkId> Filler::readahead_chunks_of(uint64_t step) {
  if (!sh_.cfg.readahead_steps.empty()) return sh_.cfg.readahead_steps[step % sh_.cfg.readahead_steps.size()];
  return step_chunks_of(step);
}

bool Filler::maybe_readahead() {
  if (!sh_.cfg.readahead || sh_.fail_closed || sh_.failed || faults_.stopping() || faults_.paused()) return false;
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
    if (evictor_.take_evicted_locked()) ra_next_step_ = 0;  // an eviction: a coming step may need it again
    // Beyond one pass of steps every chunk is of a step before: nothing more to read.
    const uint64_t pass = sh_.cfg.step_chunks.empty() ? region_.chunks() : sh_.cfg.step_chunks.size();
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
uint32_t Filler::readahead_windows() const {
  uint32_t n = 0;
  for (size_t i = 0; i < bundles_.size(); ++i)
    if (bundles_[i].live && bundles_[i].kind == FillKind::Readahead) n += fill_->windows_held(static_cast<uint32_t>(i));
  return n;
}

bool Filler::publish_readahead() {
  // A read-ahead bundle whose reads all landed is published when its step has begun (or a
  // fault waits on one of its chunks: an access the declared steps did not foresee must
  // not wait for the step), with room made the way that step's demand faults would make it:
  // the policy's victims among chunks without consumers or pins, at the same cursor.
  if (sh_.fail_closed || readahead_ready_ == 0) return false;
  bool any = false;
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
      due = faults_.stopping();
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
      if (!due) due = faults_.waits_on_locked(b.chunks);
      if (!due) continue;
      // Room for the whole bundle, or none taken (all-or-nothing).
      const uint32_t n = b.n;
      if (!evictor_.make_bundle_room_locked(n)) {
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

bool Filler::maybe_prefetch() {
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
      found = evictor_.make_prefetch_room_locked(c);
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
