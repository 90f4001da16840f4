// Filler: every fill of the region, through the Plan's one fill path (plan/fill.hpp).
//
// Contract. The filler owns the Source, the fill path over it and the Plan's windows, and
// the pager's side of each bundle (BundleRun, indexed like the fill path's fills). It starts
// demand bundles for the fault handler, reads ahead (F: the coming steps' chunks, one bundle
// per step, at most windows - 1 windows) and prefetches (E: the Policy's candidates), and
// when a bundle's reads have all been accepted copies it into the region and publishes it
// in one Plan transition, books it (resident, counted, traced, told to the Policy) and only
// then wakes its waiters. A read-ahead bundle waits in its windows (HOST_READY, no room)
// until its step begins or a fault waits on it, then takes room from the evictor all or
// nothing. A fatal rejection fails closed: nothing of its bundle, and nothing after it, is
// copied. Resets (reset.cpp) forget every unpublished bundle. The filler runs on the pager
// thread; what it books is under the Pager's mutex, and begin_bundle_locked and the
// read-ahead horizon are called with it held.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/latency.hpp"
#include "pager/evictor.hpp"
#include "pager/region.hpp"
#include "pager/shared.hpp"
#include "plan/fill.hpp"
#include "source/source.hpp"

namespace resid {

enum class FillKind : uint8_t { Demand, Prefetch, Readahead };

// What the filler asks of the fault handler, which holds the fault messages.
class FaultQueue {
 public:
  virtual ~FaultQueue() = default;
  // Chunk c was published at time t: every fault waiting on it is answered (under mu).
  virtual void wake_waiters_locked(ChunkId c, uint64_t t, FillKind kind) = 0;
  // Whether a fault waits on one of these chunks (under mu).
  virtual bool waits_on_locked(std::span<const ChunkId> chunks) const = 0;
  // A reset: no waiting fault started the read that will serve it (under mu).
  virtual void forget_triggers_locked() = 0;
  virtual bool stopping() const = 0;
  virtual bool paused() const = 0;
};

class Filler final : private FillOwner {
 public:
  // Sets up the Plan's mutable half (the source's windows, one slot per chunk at its stable
  // address) and the fill path over it.
  Filler(PagerShared& sh, Region& region, Evictor& evictor, std::unique_ptr<Source> source, FaultQueue& faults);

  const Source& source() const { return *source_; }
  // The source's completion eventfd (-1: a blocking engine, whose reads complete in submit()).
  int completion_fd() const { return cfd_; }
  bool blocking() const { return blocking_; }
  void start();

  // Windows a new read may take now (free, within the source's depth).
  uint32_t free_windows() const;
  // May chunk c's slot be requested? Not while a reset's stale read of it is in flight.
  bool slot_vacant_locked(ChunkId c);
  // Room was made for the chunks (Absent): they become Filling, their slots LOADING, as one
  // bundle; -1 when the Plan refused (the pager failed).
  int begin_bundle_locked(FillKind kind, const ChunkId* cs, uint32_t n);
  void issue() { fill_->issue(); }
  uint32_t inflight() const { return fill_->inflight(); }
  // Completions reaped (each bundle landed is published or waits for its step).
  bool reap_completions();
  bool publish_readahead();
  bool maybe_readahead();
  bool maybe_prefetch();
  void set_readahead_horizon_locked(uint64_t last_step) { readahead_last_step_ = last_step; }

  // Resets (reset.cpp): the Plan's epoch advances and every unpublished bundle is forgotten.
  PlanResult<uint32_t> reset_now();
  void maybe_fire_reset_cell();
  // The end of the fault loop: drain the source, forget what is unpublished, shut the Plan.
  void close_reads();
  // A fill stuck inside the Source longer than the watchdog: fail the pager.
  void check_stall();

  void snapshot_source_stats_locked();
  // At the close: the source's free windows then.
  void record_close_locked() { closed_windows_free_ = source_->windows_free(); }
  const SourceStats& source_stats_locked() const { return src_stats_; }
  const LatencyHistogram& fill_latency_locked() const { return fill_hist_; }
  const PagerRejectionReport& rejection_locked() const { return rejection_; }
  // The source and window report without the allocation counts (`closed`: the loop closed).
  SourceReport report_locked(bool closed) const;

 private:
  // The pager's side of a fill (indexed like the fill path's fills).
  struct BundleRun {
    bool live = false;
    FillKind kind = FillKind::Demand;
    uint32_t n = 0;
    bool ready = false;   // read-ahead: every read landed, waiting for its step
    bool roomed = false;  // its chunks' room is counted in the books' filling
    uint64_t target = 0;  // read-ahead: the step it is for
    uint64_t epoch = 0;   // the Plan's epoch when it was requested
    std::vector<ChunkId> chunks;  // capacity: the window count
  };

  // FillOwner (plan/fill.hpp), on the pager thread.
  bool copy(uint32_t fill, const CopyOrder& order, const Completion& c, uint64_t submit_ns) override;
  void on_landed(uint32_t fill) override;
  void on_rejected(uint32_t fill, PlanError kind, const Completion& c) override;
  void on_dropped(uint32_t fill) override;
  void on_internal(uint32_t fill, const char* what, PlanError e) override;
  void publish_bundle(BundleRun& b, uint32_t fill);
  void book_fill_locked(ChunkId c, FillKind kind);
  void drop_bundle(BundleRun& b);
  void forget_bundles_locked(bool stale);
  void snapshot_source_stats();
  // Read-ahead (readahead.cpp).
  std::span<const ChunkId> step_chunks_of(uint64_t step);
  std::span<const ChunkId> readahead_chunks_of(uint64_t step);
  uint32_t readahead_windows() const;

  PagerShared& sh_;
  Region& region_;
  Evictor& evictor_;
  std::unique_ptr<Source> source_;
  FaultQueue& faults_;
  std::unique_ptr<FillPath> fill_;   // the one fill path (after the Plan)
  std::vector<BundleRun> bundles_;   // at most one per window at a time
  int cfd_ = -1;
  bool blocking_ = true;
  // Under mu.
  SourceStats src_stats_;  // copied after each fill, so readers never race the pager thread
  LatencyHistogram fill_hist_;
  PagerRejectionReport rejection_;
  uint64_t cancellations_ = 0;
  uint64_t closed_windows_free_ = 0;
  uint64_t ra_next_step_ = 0;                  // the first step whose read-ahead is not complete
  uint64_t readahead_last_step_ = UINT64_MAX;  // no read-ahead beyond it
  // Pager thread only.
  int rejected_bundle_ = -1;       // the fill of the first fatal rejection
  uint32_t readahead_ready_ = 0;   // read-ahead bundles landed, waiting for their step
  std::vector<uint64_t> cur_mark_; // chunk -> stamp of the step it is in (read-ahead)
  uint64_t cur_stamp_ = 0;
  std::vector<ChunkId> ra_chunks_;
  std::vector<int32_t> req_slots_; // a bundle's request (no allocation on the read path)
  std::vector<uint64_t> req_tags_;
  std::vector<ChunkId> candidates_;
  ChunkId one_chunk_ = 0;
};

}  // namespace resid
