// FaultHandler: the pager thread and the faults it serves (pager.hpp has the design).
//
// Contract. The handler owns the pager thread and everything only that thread touches: the
// fault loop (read the userfaultfd, serve the waiting faults, reap the source's
// completions through the filler, read ahead and prefetch when idle, the final drain), the
// waiting fault messages, the deferral of faults ahead of the cursor, the watchdog of a
// fault left unserved, the latency of every exposed wait, the read path's allocation
// counts and the request desk (a driver's reset or shutdown probe, carried out on the pager
// thread since it alone owns the fills in flight). A driver's thread reaches it only
// through notify() and the atomics below; the filler asks about the waiting faults through
// FaultQueue, under the Pager's mutex. Set up in two steps: construct, then attach() the
// filler (which itself needs this FaultQueue), before start().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "core/alloc_count.hpp"
#include "core/latency.hpp"
#include "pager/evictor.hpp"
#include "pager/filler.hpp"
#include "pager/region.hpp"
#include "pager/shared.hpp"
#include "plan/state.hpp"

namespace resid {

class FaultHandler final : public FaultQueue {
 public:
  // Opens the notification eventfd (InputError if it cannot) and sizes the fault queue once:
  // the fault loop never allocates.
  FaultHandler(PagerShared& sh, Region& region, Evictor& evictor);
  ~FaultHandler() override;
  FaultHandler(const FaultHandler&) = delete;
  FaultHandler& operator=(const FaultHandler&) = delete;

  // The filler this handler drives; once, before start().
  void attach(Filler& filler) { filler_ = &filler; }
  // Starts the source and the pager thread. Idempotent.
  void start();
  // Pager::shutdown: serve every pending fault, run `quiesce` meanwhile, close the reads and
  // join the pager thread (never started: shut the Plan and close at once). Idempotent.
  void shutdown(const std::function<void()>& quiesce);
  bool started() const { return started_; }

  // Wake the pager thread (a leave, a signal, a request, shutdown).
  void notify();
  // After a leave: a fault may wait for the room it made.
  void leave_notify() {
    if (want_leave_notify_.load(std::memory_order_relaxed)) notify();
  }
  // Whether a fault waits for a consumption signal (set under the Pager's mutex).
  bool deferred_waiting() const { return deferred_waiting_.load(); }
  // Whether a compute thread is blocked in a fault that will never be served: the run failed
  // closed (no further read, copy or publication) with faults still waiting after a turn.
  bool faults_stranded() const { return faults_stranded_.load(std::memory_order_relaxed); }
  // Pager::release_ahead_faults: defer nothing more; every deferred fault is decided now.
  void release_ahead_faults();
  // Pager::pause: hold the fault loop (a test control).
  void pause(bool on);
  // Pager::reset and Pager::try_plan_shutdown, from a driver's thread (reset.cpp).
  PlanResult<uint32_t> reset();
  PlanError try_plan_shutdown();

  // Read every message the userfaultfd holds now (the region's close reads the last ones).
  void read_messages();

  // Under the Pager's mutex: the exposed waits' and demand faults' latency into s.
  void add_latency_locked(PagerStats& s) const;
  // Under the Pager's mutex: the read path's allocations since start into r.
  void add_allocations_locked(SourceReport& r) const;
  // Under the Pager's mutex: whether the fault loop has closed.
  bool closed_locked() const { return alloc_done_; }

  // FaultQueue (filler.hpp): the filler's questions about the waiting faults.
  void wake_waiters_locked(ChunkId c, uint64_t t, FillKind kind) override;
  bool waits_on_locked(std::span<const ChunkId> chunks) const override;
  void forget_triggers_locked() override;
  bool stopping() const override { return stopping_.load(); }
  bool paused() const override { return paused_.load(); }

 private:
  enum class Request : uint8_t { None, Reset, ShutdownProbe };
  struct PendingFault {
    uintptr_t addr;
    uint64_t t_read_ns;
    bool trigger;   // this fault started its chunk's demand read
    bool deferred;  // it waited for the signal of the step before its own (counted once)
  };

  // What serve_one did with a waiting fault: it still waits; it left the queue (not the
  // region's: no progress); it was answered (woken, or its page unmapped); its read starts.
  enum class Served : uint8_t { Waits, Dropped, Answered, Read };

  void loop();
  // The pager thread's own nice (PagerConfig::thread_nice), recorded in the stats.
  void set_priority();
  bool turn();
  void wait_for_work();
  void close_loop();
  void handle_unmap(uintptr_t start, uintptr_t end);
  bool serve_pending();
  Served serve_one(size_t i);
  bool defer_fault_locked(PendingFault& f, ChunkId c);
  uint64_t fault_step_locked(ChunkId c) const;
  void check_watchdog();
  // reset.cpp (the request desk).
  bool serve_request();
  PlanResult<uint32_t> await_request(Request r);

  PagerShared& sh_;
  Region& region_;
  Evictor& evictor_;
  Filler* filler_ = nullptr;
  int evfd_ = -1;

  // Under mu. fault_hist_: every exposed wait (a demand fault, or the first wait on a
  // read-ahead or prefetch in flight); demand_hist_: a demand fault's service time only.
  LatencyHistogram fault_hist_, demand_hist_;
  AllocCounts alloc0_{}, alloc1_{};
  bool alloc_done_ = false;  // the fault loop has closed

  // Pager thread only.
  std::vector<PendingFault> pending_;
  bool watchdog_reported_ = false;

  // A driver's request to the pager thread (reset.cpp), guarded by mu.
  Request request_ = Request::None;
  uint64_t request_serial_ = 0, request_done_ = 0;
  PlanResult<uint32_t> request_answer_{};
  std::condition_variable request_cv_;
  std::atomic<bool> request_waiting_{false};

  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopping_quiesced_{false};
  std::atomic<bool> paused_{false};
  std::atomic<bool> want_leave_notify_{false};
  std::atomic<bool> deferred_waiting_{false};  // a fault waits for a signal: signals notify
  std::atomic<bool> ahead_released_{false};    // release_ahead_faults: defer nothing more
  std::atomic<bool> faults_stranded_{false};   // set at the end of each turn (pager thread)
  std::thread thread_;
  bool started_ = false;
  bool shut_ = false;
};

}  // namespace resid
