// The fault loop (fault_handler.hpp): the pager thread reads the userfaultfd, serves faults,
// reaps the source's completions, watches itself (the watchdog) and closes the reads at the
// end.
#include "pager/fault_handler.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "pager/pager_internal.hpp"

namespace resid {

void FaultHandler::check_watchdog() {
  if (pending_.empty() || watchdog_reported_ || paused_) return;
  const uint64_t limit = static_cast<uint64_t>(sh_.cfg.watchdog_s * 1e9);
  const uint64_t age = now_ns() - pending_.front().t_read_ns;
  if (age < limit) return;
  watchdog_reported_ = true;
  const ChunkId c = static_cast<ChunkId>((pending_.front().addr - reinterpret_cast<uintptr_t>(region_.base())) /
                                         sh_.cfg.chunk_size);
  RejectionPathScope scope;
  std::string ev;
  bool reading = false, deferred = false;
  uint64_t step = 0;
  {
    std::lock_guard lk(sh_.mu);
    ev = sh_.evidence_locked();
    reading = sh_.books[c].state == ChunkState::Filling;
    deferred = pending_.front().deferred && sh_.books[c].state == ChunkState::Absent;
    step = fault_step_locked(c);
  }
  if (deferred) {
    sh_.fail("watchdog: fault on chunk " + std::to_string(c) + " not served within " + std::to_string(sh_.cfg.watchdog_s) +
         " s: it is for step " + std::to_string(step) + " and waits for the consumption signal of step " +
         std::to_string(step - 1) + ", which never came; " + ev);
    return;
  }
  if (reading) {
    sh_.fail("watchdog: fault on chunk " + std::to_string(c) + " not served within " + std::to_string(sh_.cfg.watchdog_s) +
         " s: its read has been in the " + to_string(filler_->source().engine()) + " source all that time (storage not "
         "answering); " + ev);
    return;
  }
  sh_.fail("watchdog: fault on chunk " + std::to_string(c) + " not served within " +
       std::to_string(sh_.cfg.watchdog_s) + " s (no evictable chunk: every resident chunk has live "
       "consumers or a pin); " + ev);
}

void FaultHandler::loop() {
  set_priority();
  // The fault loop is the read path: after start it must not allocate (alloc_count.hpp);
  // failure messages are built on the rejection path.
  ReadPathScope scope;
  {
    std::lock_guard lk(sh_.mu);
    alloc0_ = alloc_counts();
  }
  for (;;) {
    const bool progressed = turn();
    if (stopping_ && stopping_quiesced_ && !paused_ && (pending_.empty() || sh_.failed) && (filler_->inflight() == 0 || sh_.failed)) {
      // Final drain: anything that arrived after the last read is served before we leave.
      read_messages();
      if (pending_.empty() || sh_.failed) break;
      continue;
    }
    check_watchdog();
    if (!progressed) wait_for_work();
  }
  close_loop();
}

// One pass over everything that may have arrived; whether anything moved.
bool FaultHandler::turn() {
  read_messages();
  uint64_t drained;
  while (::read(evfd_, &drained, sizeof drained) > 0) {
  }
  if (filler_->completion_fd() >= 0)
    while (::read(filler_->completion_fd(), &drained, sizeof drained) > 0) {
    }
  bool progressed = filler_->reap_completions();
  progressed |= serve_request();
  if (!paused_) {
    progressed |= filler_->publish_readahead();
    progressed |= serve_pending();
    // While the shutdown probe waits for the reads in flight, nothing new is read ahead.
    const bool probing = request_waiting_.load();
    if (!probing) progressed |= filler_->maybe_readahead();
    if (!progressed && pending_.empty() && !stopping_ && !probing) progressed = filler_->maybe_prefetch();
    filler_->maybe_fire_reset_cell();  // before a blocking read is reaped: it is outstanding until then
    if (filler_->blocking()) progressed |= filler_->reap_completions();  // a blocking read completed in submit()
  }
  // A fault still waiting now is on a chunk that is neither resident nor readable any more.
  faults_stranded_.store(sh_.fail_closed && !pending_.empty() && !paused_, std::memory_order_relaxed);
  sh_.run_due_failure_callback();
  return progressed;
}

// Block until a fault/event, a completion, a notification (leave, signal, shutdown), or the
// next watchdog tick when a fault is waiting for room.
void FaultHandler::wait_for_work() {
  const bool waiting = !pending_.empty() && !paused_;
  want_leave_notify_.store(waiting || sh_.cfg.prefetch_depth > 0 || sh_.cfg.readahead, std::memory_order_relaxed);
  pollfd fds[3] = {{region_.uffd(), POLLIN, 0}, {evfd_, POLLIN, 0}, {filler_->completion_fd(), POLLIN, 0}};
  ::poll(fds, filler_->completion_fd() >= 0 ? 3 : 2, waiting ? 20 : -1);
}

// The loop has left: the reads close, the counts are taken, the registration ends.
void FaultHandler::close_loop() {
  filler_->close_reads();
  {
    std::lock_guard lk(sh_.mu);
    alloc1_ = alloc_counts();
    filler_->snapshot_source_stats_locked();
    filler_->record_close_locked();
    alloc_done_ = true;
  }
  region_.finish_registration();
}

void FaultHandler::read_messages() {
  uffd_msg msgs[64];
  for (;;) {
    const ssize_t n = ::read(region_.uffd(), msgs, sizeof msgs);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) sh_.fail("read from userfaultfd failed (" + errno_name(errno) + ")");
      return;
    }
    const uint64_t t = now_ns();
    const size_t count = static_cast<size_t>(n) / sizeof(uffd_msg);
    for (size_t i = 0; i < count; ++i) {
      const uffd_msg& m = msgs[i];
      if (m.event == UFFD_EVENT_PAGEFAULT) {
        const uintptr_t addr = static_cast<uintptr_t>(m.arg.pagefault.address) & ~(uintptr_t)(region_.geometry().page - 1);
        {
          std::lock_guard lk(sh_.mu);
          ++sh_.st.faults_handled;
          const uintptr_t b = reinterpret_cast<uintptr_t>(region_.base());
          if (sh_.pins.oversize() && addr >= b && addr < b + region_.geometry().registered_bytes)
            sh_.pins.pin(m.arg.pagefault.feat.ptid, static_cast<ChunkId>((addr - b) / sh_.cfg.chunk_size), sh_.cfg.max_pins,
                      sh_.books, *sh_.plan, sh_.st.pin_moves, sh_.st.max_pins);
        }
        pending_.push_back({addr, t, false, false});
      } else if (m.event == UFFD_EVENT_UNMAP) {
        handle_unmap(static_cast<uintptr_t>(m.arg.remove.start), static_cast<uintptr_t>(m.arg.remove.end));
      }
    }
    if (count < sizeof msgs / sizeof msgs[0]) return;
  }
}

void FaultHandler::handle_unmap(uintptr_t start, uintptr_t end) {
  const auto [lo, hi] = region_.book_unmap(start, end);
  // Faults queued for the hole: wake them so they retry (and die with SIGSEGV, as an
  // access to unmapped memory must), and forget them.
  std::erase_if(pending_, [&](const PendingFault& f) { return f.addr >= start && f.addr < end; });
  if (lo < hi) region_.wake_range(lo, hi);
}

// The step a demand fault on absent chunk c is for: the first step at or after the current
// one that reads c (chunk steps: step s reads chunk s mod chunks).
uint64_t FaultHandler::fault_step_locked(ChunkId c) const {
  return sh_.step + (c + region_.chunks() - sh_.step % region_.chunks()) % region_.chunks();
}

// Whether the fault waits for the signal of the step before its own (pager.hpp: faults ahead
// of the cursor); counted once per fault.
bool FaultHandler::defer_fault_locked(PendingFault& f, ChunkId c) {
  if (!sh_.cfg.defer_ahead_faults || ahead_released_.load() || stopping_.load()) return false;
  if (fault_step_locked(c) <= sh_.signal_next) return false;
  if (!f.deferred) ++sh_.st.deferred_faults;
  f.deferred = true;
  deferred_waiting_ = true;
  return true;
}

bool FaultHandler::serve_pending() {
  bool progressed = false;
  deferred_waiting_ = false;  // set again under sh_.mu by each fault still deferred
  for (size_t i = 0; i < pending_.size();) {
    const Served r = serve_one(i);
    if (r == Served::Waits) {
      ++i;
      continue;
    }
    if (r == Served::Dropped || r == Served::Answered) {
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      progressed |= r == Served::Answered;
      continue;
    }
    filler_->issue();
    progressed = true;
    ++i;
    // A blocking read happened inside submit(): publish it before the next one, so the
    // userfaultfd's messages (events) are read in between.
    if (filler_->blocking()) break;
  }
  return progressed;
}

// What waiting fault i needs now; a demand read it starts is requested here (issued by the
// caller, outside the mutex).
FaultHandler::Served FaultHandler::serve_one(size_t i) {
  const PendingFault f = pending_[i];
  if (!region_.holds(f.addr)) return Served::Dropped;  // not ours: let it retry
  const ChunkId c = region_.chunk_of(f.addr);
  const uintptr_t b = reinterpret_cast<uintptr_t>(region_.base());
  std::lock_guard lk(sh_.mu);
  // stale: the hole was woken when the unmap event was read
  if (sh_.books.page_unmapped((f.addr - b) / region_.geometry().page)) return Served::Answered;
  if (sh_.books[c].state == ChunkState::Resident) {
    // Already published (another thread's fault or a read-ahead filled it): wake it.
    ++sh_.st.spurious_faults;
    ++sh_.st.waited_faults;
    sh_.st.exposed_wait_ns += now_ns() - f.t_read_ns;
    region_.wake_range(f.addr, f.addr + region_.geometry().page);
    return Served::Answered;
  }
  // Filling: its read is in flight; the fault waits for it (never a second read).
  // Otherwise it waits for a window, for room (a leave), or its chunk's read was
  // rejected (the run has failed).
  // Or its step is ahead of the cursor: it waits for the signal of the step before.
  if (sh_.books[c].state != ChunkState::Absent || sh_.books[c].poisoned || !filler_->slot_vacant_locked(c) || sh_.fail_closed ||
      defer_fault_locked(pending_[i], c) || filler_->free_windows() == 0 || !evictor_.make_room_locked(c))
    return Served::Waits;
  if (filler_->begin_bundle_locked(FillKind::Demand, &c, 1) < 0) return Served::Waits;
  sh_.books[c].prefetched_unused = 0;
  pending_[i].trigger = true;
  return Served::Read;
}

// ---- FaultQueue: the filler's questions about the waiting faults ----------------------

void FaultHandler::wake_waiters_locked(ChunkId c, uint64_t t, FillKind kind) {
  // Every fault message on chunk c is a compute thread blocked on it: its wait is exposed.
  const uintptr_t b = reinterpret_cast<uintptr_t>(region_.base());
  bool first = true;
  for (size_t i = 0; i < pending_.size();) {
    const PendingFault& f = pending_[i];
    if (f.addr < b || f.addr >= b + region_.geometry().registered_bytes || (f.addr - b) / sh_.cfg.chunk_size != c) {
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

bool FaultHandler::waits_on_locked(std::span<const ChunkId> chunks) const {
  for (const PendingFault& f : pending_) {
    if (!region_.holds(f.addr)) continue;
    const ChunkId c = region_.chunk_of(f.addr);
    if (std::find(chunks.begin(), chunks.end(), c) != chunks.end()) return true;
  }
  return false;
}

void FaultHandler::forget_triggers_locked() {
  for (PendingFault& f : pending_) f.trigger = false;
}

}  // namespace resid
