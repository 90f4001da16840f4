// Pager: a userfaultfd region with stable addresses that replaces a file mapping.
//
// The region is an anonymous private mapping of the file size rounded up to chunks,
// registered in MISSING mode. One pager thread reads the userfaultfd: a fault on an absent
// chunk makes room within the budget (the Policy picks victims among chunks with zero live
// consumers; eviction is MADV_DONTNEED), reads the chunk through the Source into its
// window and publishes it with UFFDIO_COPY, which wakes every thread waiting on it.
// Everything the kernel does to the region is decided here, so the budget is exact:
// resident chunks never exceed budget_chunks.
//
// Oversize steps (generate, step_boundary(..., oversize=true)): a step whose chunks cannot
// all stay resident runs without live consumers on its chunks. Instead the pager pins, per
// compute thread (the faulting thread's id, UFFD_FEATURE_THREAD_ID), the last
// kPinsPerThread distinct chunks that thread faulted on, for at most max_pins threads; the
// pins are dropped at every step change (a step boundary is between graph nodes: no compute
// thread is reading weights then).
// Progress (no livelock): a thread blocked in a fault reads nothing else. When its fault
// message is read the fault's chunk becomes its newest pin and its oldest pin beyond
// kPinsPerThread is released, so it holds at most kPinsPerThread - 1 pins on resident
// chunks besides the faulting one; the other threads hold at most
// kPinsPerThread * (max_pins - 1). With budget_chunks >= kPinsPerThread * max_pins + 1 a
// victim therefore always exists and the fault is filled. The filled chunk stays pinned
// until that same thread has faulted on kPinsPerThread other chunks, which it can only do
// after its retried access succeeded; so every fill completes at least the access that
// faulted, and a step (a finite number of accesses) always finishes. Two pins per thread
// make the common case cheap, not just finite: a thread that alternates between two chunks
// (a tile of rows straddling a chunk boundary) keeps both. Chunks the threads read without
// faulting may be evicted under them: they fault again and are refilled with the same
// bytes (MISSING mode never shows a zero page), which costs a fill, never exactness.
//
// Huge chunks (HugeChunks): how a filled chunk is backed. `off`: UFFDIO_COPY into 4 KiB
// pages (physically scattered). `move`: the region is writable and a whole, 2 MiB-aligned
// chunk read into a (huge-page) window is published with UFFDIO_MOVE: the window's pages,
// a transparent huge page when the kernel gave the window one, become the chunk's (zero
// copy); the window is refaulted by its next read (the budget already pays a window).
// `collapse`: COPY, then MADV_COLLAPSE of the chunk (the collapse allocates the new huge
// page before it frees the 512 small ones: the caller reserves one chunk of budget for it).
//
// The Plan (plan.hpp, plan_state.hpp). Every fill runs through it: the manifest has one
// object per chunk (its file extent), the slots are the chunks (slot c is chunk c's range of
// the region, a stable address), in open-consumer mode. A fill requests its chunks' slots
// as one bundle (VACANT -> LOADING, the generation advances), reads each chunk under a
// window ticket (FREE -> READING; the source's completion is validated by the Plan:
// window, generation, epoch, object and extent; a short, failed or out-of-file read is
// rejected -> HOST_READY), and only when every read of the bundle was accepted copies them
// into the region (HOST_READY -> COPYING, UFFDIO_COPY or UFFDIO_MOVE, -> FREE) and
// publishes the bundle in one transition (LOADING -> DEVICE_READY, or IN_USE when held),
// then wakes the faulting threads. A rejected read fails the run and nothing of its bundle
// is copied. Consumers (enter/leave) and oversize pins are the Plan's consumers (hold/
// unhold); an eviction is the slot's recycle (RECYCLABLE or never-held DEVICE_READY ->
// VACANT), and the Plan refuses it for a slot with a live consumer, so the pager's rule
// "never evict a chunk with live consumers" is the Plan's invariant.
//
// Sources: the blocking engines (buffered, direct: one window) complete a read inside
// submit(); the fault loop reads on demand, one fill at a time. `uring` (N windows, depth
// <= N) reads asynchronously: demand reads of several faults are in flight together, and
// with PagerConfig::readahead, from step s the pager reads the chunks of the coming steps
// s+1, s+2, ... ahead (for step t: those absent and of none of the steps s..t-1, which read
// them themselves), one bundle per step and in step order, while a window is free for it
// (at most N-1 in read-ahead: one stays free for demand reads), up to readahead_steps_ahead
// steps (0: no limit but the windows). A read-ahead bundle waits in its windows (HOST_READY;
// the windows are paid from the budget) and takes no room until its step t begins: then
// room is made for the whole bundle exactly as step t's demand faults would make it (the
// policy's victims among chunks without consumers or pins, at the same cursor), and it is
// published all-or-nothing. A chunk absent at s and of no step before t stays absent until
// t under any timing, so D reads it at t too. So read-ahead changes when chunks are read,
// not which chunks the policy keeps. A fault on a chunk whose read is in flight waits for
// it (never a second read); a fault on a landed read-ahead chunk before its step publishes
// the bundle at once.
//
// Faults ahead of the cursor (PagerConfig::defer_ahead_faults, chunk steps only: the scan,
// whose driver threads may run at their own pace). A demand fault on a chunk absent now is
// for the first step at or after the current one that reads it (step_ + distance in the
// cycle). When that step t is beyond the step after the latest consumption signal, the
// fault waits (it is deferred, not refused) until the signal of step t-1 arrives, and only
// then are its victims chosen. Why: with the signal fired when every thread has finished a
// step, a thread that runs ahead faults while the cursor still lags at the slowest thread;
// the policy would choose its victims at whatever cursor that thread's lead happens to
// leave (seen: the declared policy evicted a different kept chunk in each repetition of a
// free-running stress cell). Decided at the cursor of its own step, every fault sees the
// resident set and the consumers a lockstep run would: nobody has passed step t (its chunk
// is absent), and every step before it is finished. So the access outcomes do not depend
// on timing. The racy thread0-started signal still races: its cursor is thread 0's, ahead
// of slower threads, so its victims still follow them. Progress: the slowest thread's
// fault is for the current step s, and the latest signal is at least s-1 (every thread,
// thread 0 included, has finished s-1), so it is always decided; each thread holds at most
// one chunk, so it finds room. A walk that stops early, and shutdown, release every
// deferred fault (release_ahead_faults): no thread is left waiting for a signal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pager/books.hpp"
#include "pager/config.hpp"
#include "pager/evictor.hpp"
#include "pager/fault_handler.hpp"
#include "pager/filler.hpp"
#include "pager/pins.hpp"
#include "pager/region.hpp"
#include "pager/shared.hpp"
#include "pager/signal_audit.hpp"
#include "pager/trace.hpp"
#include "pager/uffd.hpp"
#include "plan/fill.hpp"
#include "plan/manifest.hpp"
#include "plan/state.hpp"
#include "policy/policy.hpp"
#include "source/source.hpp"

namespace resid {

class Pager final {
 public:
  // Oversize steps: chunks pinned per compute thread (see above).
  static constexpr uint32_t kPinsPerThread = ThreadPins::kPerThread;

  // Maps and registers the region (throws InputError if userfaultfd is unavailable or the
  // configuration is invalid). The pager thread starts with start().
  Pager(std::unique_ptr<Source> source, std::unique_ptr<Policy> policy, PagerConfig cfg,
        Trace* trace = nullptr);
  ~Pager();
  Pager(const Pager&) = delete;
  Pager& operator=(const Pager&) = delete;

  // Page-table pages needed to map `mapped_bytes` of region with 4 KiB pages (one PTE
  // page per 2 MiB, one PMD page per 1 GiB, on x86-64 and arm64 with 4 KiB pages). The
  // kernel charges them to the cgroup and keeps them after MADV_DONTNEED, so the pager
  // pays for them out of its budget.
  static uint64_t page_table_reserve(uint64_t mapped_bytes);

  void start();
  // Drain: serve every pending fault; `quiesce` (if given) runs on the calling thread while
  // the pager still serves (e.g. join the threads that use the region). Then mprotect
  // (PROT_NONE) and UFFDIO_UNREGISTER so a late access dies with SIGSEGV instead of
  // reading a zero page, and join the pager thread. Idempotent.
  void shutdown(const std::function<void()>& quiesce = {});

  const std::byte* base() const { return region_->base(); }
  uint64_t file_bytes() const { return region_->geometry().file_bytes; }
  uint64_t chunk_size() const { return sh_.cfg.chunk_size; }
  uint32_t chunks() const { return region_->chunks(); }
  uint64_t budget_chunks() const { return sh_.cfg.budget_chunks; }
  // Bytes of chunk c that hold file data, page rounded (the tail chunk may be short).
  uint64_t chunk_length(ChunkId c) const;
  UffdMode uffd_mode() const { return region_->uffd_mode(); }
  const Source& source() const { return filler_->source(); }
  const Plan& plan() const { return *sh_.plan; }
  // The Plan's shutdown answer (None: ok; nullopt before the pager shut down).
  std::optional<PlanError> plan_shutdown() const;
  // After shutdown: the source and window report.
  SourceReport source_report() const;
  PagerRejectionReport rejection_report() const;
  // Negative control: ask the Plan to recycle chunk c's slot (an eviction) regardless of the
  // pager's own rule. Refused with ConsumersLive while c has a consumer or a pin; if the
  // Plan agrees, the chunk is evicted. Returns the Plan's answer.
  PlanError try_recycle(ChunkId c);
  // Reset the Plan now (reset.cpp): the pager thread advances the epoch, forgets every
  // unpublished bundle (reads still in flight come back StaleEpoch and are retired, never
  // copied; landed ones are retired in their windows) and re-reads what faults still need
  // in the new epoch. Resident (published) chunks stay. Waits for the pager thread; returns
  // the Plan's answer and the source operations outstanding at the reset (ShutDown when the
  // pager is not running).
  PlanResult<uint32_t> reset();
  // The shutdown-live-consumer cell: once no read is in flight, the pager thread asks the
  // Plan to shut down now and returns its answer (ConsumersLive while a consumer holds a
  // chunk; if the Plan agreed, it is shut down and the pager can fill nothing more).
  PlanError try_plan_shutdown();

  // Consumers: a chunk with a live consumer is never evicted.
  void enter(ChunkId c);
  void leave(ChunkId c);
  // leave(c), and the step being computed is done with c before it ends (tensor signals:
  // the policy then knows its next use is after this step).
  void leave_consumed(ChunkId c);
  // Consumption signal: the chunk of global step `cursor` was consumed.
  void signal(uint64_t cursor);
  // No more signals will come (a walk that stopped early): every fault deferred to the
  // cursor of its step (PagerConfig::defer_ahead_faults) is decided now.
  void release_ahead_faults();
  // The step events are attributed to in the trace.
  void set_step(uint64_t step);
  // The last step the workload will run: nothing is read ahead for a later one.
  void set_readahead_horizon(uint64_t last_step);
  // signal(cursor) (if any) and set_step(next) as one atomic update, so no pager decision
  // can see the new cursor with the old step. `oversize`: the new step runs oversize (no
  // live consumers on its chunks; per-thread pins instead). A step change drops every pin.
  void step_boundary(std::optional<uint64_t> cursor, uint64_t next_step, bool oversize = false);
  // Whether the current step runs oversize (generate: known at the pass start, when the
  // batch's tokens are). Drops every pin.
  void set_step_oversize(bool oversize);
  // Before the first step (a model load): reads then belong to no step, so nothing holds
  // their chunks; each faulting thread's last chunks are pinned as in an oversize step (none
  // counted), or a policy could evict the chunk a loader is reading (the declared one does:
  // a chunk read out of the declared order has the farthest next use) on every fill. The
  // first set_step_oversize or step change ends it.
  void set_loading();

  // Was chunk c demand-filled while `step` was current?
  bool demand_filled_in(ChunkId c, uint64_t step) const;
  bool resident(ChunkId c) const;
  uint64_t fills_of(ChunkId c) const;

  bool failed() const { return sh_.failed.load(); }
  std::string error() const;
  // Called once, from the pager thread, when the pager fails (watchdog, rejected read...).
  void set_failure_callback(std::function<void()> cb);
  // Whether the pager failed closed with a compute thread blocked in a fault it will never
  // serve (the workload cannot finish; FaultHandler::faults_stranded).
  bool faults_stranded() const;

  PagerStats stats() const;
  SourceStats source_stats() const;
  SignalAudit audit() const;
  std::vector<ChunkId> resident_set() const;
  // Chunks pinned now (oversize steps), ascending.
  std::vector<ChunkId> pinned_set() const;
  // Bytes of the region the kernel backs with transparent huge pages now (the
  // AnonHugePages of the region's mappings in /proc/self/smaps); nullopt if unreadable.
  std::optional<uint64_t> region_huge_bytes() const;
  // Bytes of the region mlocked now (smaps Locked; PagerConfig::protect); nullopt if unreadable.
  std::optional<uint64_t> region_locked_bytes() const;

  // Watchdog for the one case the pager thread cannot watch itself: a fill stuck inside the
  // Source (storage that stopped answering). Call periodically from another thread; fails
  // the pager once a fill has been in progress longer than watchdog_s.
  void check_stall();

  // Hold the fault loop (faults queue up unserved); shutdown() releases it. A test control
  // (the T-suite's shutdown with faults outstanding), not a fault cell.
  void pause(bool on);
  // One reconcile check now; returns the mismatching chunks it found.
  uint64_t reconcile_now();
  // Description of the first reconcile mismatch (empty if none).
  std::string first_mismatch() const;

 private:
  void build_chunk_manifest(const Region::Geometry& g, const Source& source);
  void leave_impl(ChunkId c, bool consumed);

  // What every component shares (shared.hpp), then the components: the region and its
  // books' kernel side, the evictor, the fault handler (the pager thread) and the filler.
  // Declared in build order; the handler is attached to the filler, which asks it about
  // the waiting faults.
  PagerShared sh_;
  std::unique_ptr<Region> region_;
  std::unique_ptr<Evictor> evictor_;
  std::unique_ptr<FaultHandler> faults_;
  std::unique_ptr<Filler> filler_;
  SignalAudit audit_;
};

}  // namespace resid
