// Plan resets and the shutdown probe: a driver's requests that only the pager thread may
// carry out, since it alone owns the fill path (plan/fill.hpp) and the fills in flight: the
// fault handler's request desk, and the filler's side of a reset.
//
// A reset (reference 004 §3.4) advances the Plan's epoch and invalidates every unpublished
// version. The pager then forgets its unpublished bundles: their chunks go back to Absent
// (not poisoned: nothing was wrong with them), landed reads are retired in their windows,
// reads still in flight come back StaleEpoch and are retired by the Plan, never copied. A
// chunk whose stale read is still in flight keeps its slot LOADING until that completion
// comes, so it is re-requested only once its slot is VACANT again (ChunkRecord::stale). Faults waiting
// on such a chunk stay queued and are served by a new read in the new epoch.
#include <algorithm>
#include <chrono>

#include "pager/fault_handler.hpp"
#include "pager/filler.hpp"
#include "pager/pager_internal.hpp"

namespace resid {

PlanResult<uint32_t> FaultHandler::reset() { return await_request(Request::Reset); }

PlanError FaultHandler::try_plan_shutdown() { return await_request(Request::ShutdownProbe).error; }

// From a driver's thread: hand the request to the pager thread and wait for its answer.
PlanResult<uint32_t> FaultHandler::await_request(Request r) {
  if (!started_ || shut_) return {PlanError::ShutDown, 0};
  std::unique_lock lk(sh_.mu);
  request_ = r;
  const uint64_t me = ++request_serial_;
  request_waiting_.store(r == Request::ShutdownProbe);
  lk.unlock();
  notify();
  lk.lock();
  while (request_done_ < me) {
    if (sh_.failed.load()) return {PlanError::ShutDown, 0};
    request_cv_.wait_for(lk, std::chrono::milliseconds(50));
  }
  return request_answer_;
}

// The pager thread: carry out a waiting request (false while the shutdown probe waits for
// the reads in flight: with one outstanding the Plan would answer OutstandingReads, which
// is not what the probe asks).
bool FaultHandler::serve_request() {
  Request r;
  uint64_t serial;
  {
    std::lock_guard lk(sh_.mu);
    r = request_;
    serial = request_serial_;
  }
  if (r == Request::None) return false;
  PlanResult<uint32_t> answer{};
  if (r == Request::Reset) {
    answer = filler_->reset_now();
  } else {
    if (filler_->inflight() > 0) return false;
    answer.error = sh_.plan->shutdown();
  }
  {
    std::lock_guard lk(sh_.mu);
    request_answer_ = answer;
    request_done_ = serial;
    request_ = Request::None;
    request_waiting_.store(false);
  }
  request_cv_.notify_all();
  return true;
}

PlanResult<uint32_t> Filler::reset_now() {
  const PlanResult<uint32_t> r = sh_.plan->reset();
  if (!r.ok()) return r;
  fill_->retire_all();
  std::lock_guard lk(sh_.mu);
  forget_bundles_locked(true);
  ++sh_.st.reset.resets;
  ra_next_step_ = 0;  // the coming steps' read-ahead is read again in the new epoch
  faults_.forget_triggers_locked();
  if (sh_.cfg.eager_reconcile) region_.reconcile_locked();
  return r;
}

// Every live bundle leaves the books unpublished: its chunks go back to Absent. `stale`: a
// reset (the chunks are read again later); otherwise the close (nothing is read again).
void Filler::forget_bundles_locked(bool stale) {
  for (BundleRun& b : bundles_) {
    if (!b.live) continue;
    for (ChunkId c : b.chunks) {
      if (sh_.books[c].state == ChunkState::Filling) {
        sh_.books[c].state = ChunkState::Absent;
        if (b.roomed) sh_.books.return_room(1);
        if (stale) sh_.books[c].stale = 1;
      }
      if (stale) sh_.books[c].prefetched_unused = 0;
    }
    b.live = false;
    b.ready = false;
    if (stale) ++sh_.st.reset.bundles_forgotten;
  }
  readahead_ready_ = 0;
}

// May chunk c's slot be requested? Not while a reset's stale read of it is in flight.
bool Filler::slot_vacant_locked(ChunkId c) {
  if (!sh_.books[c].stale) return true;
  if (sh_.plan->slot_phase(static_cast<int32_t>(c)) != SlotPhase::Vacant) return false;
  sh_.books[c].stale = 0;
  return true;
}

// The reset-outstanding cell: the first point, once read N was submitted, with reads
// outstanding (two when the source's depth allows, so the reset lands inside a bundle).
void Filler::maybe_fire_reset_cell() {
  if (!sh_.cfg.reset_at_read || sh_.st.reset.cell_fired || sh_.fail_closed || sh_.failed) return;
  const uint64_t issued = fill_->counters().reads_issued;
  const uint32_t want = static_cast<uint32_t>(std::min<size_t>(2, source_->max_inflight()));
  if (issued == 0 || issued - 1 < *sh_.cfg.reset_at_read || fill_->inflight() < want) return;
  const PlanResult<uint32_t> r = reset_now();
  if (!r.ok()) {
    sh_.fail_with([&] { return std::string("internal: the Plan refused the reset (") + to_string(r.error) + ")"; });
    return;
  }
  std::lock_guard lk(sh_.mu);
  sh_.st.reset.cell_fired = true;
  sh_.st.reset.cell_read = issued - 1;
  sh_.st.reset.cell_outstanding = r.value;
}

}  // namespace resid
