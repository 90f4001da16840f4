// The one fill path (docs/design.md): the Plan-driven movement of a bundle's objects through
// a Source into their slots, used by the pager (slots: chunks of its region) and by
// `residctl stream` (slots: the slot arena). The owner requests a bundle from the Plan and
// hands it to track(); from there every read goes the same way:
//
//   issue():  window = source.free_window(); tag = plan.begin_read(bundle, slot, piece,
//             window) (FREE -> READING); source.submit(piece's extent, tag)
//   reap():   plan.complete_read(completion): accepted (HOST_READY) or rejected (the ticket
//             retired, the window FREE in the Plan; the source's window is released)
//   landing:  plan.begin_copy (COPYING) -> owner.copy(order) -> plan.end_copy (FREE)
//   publish(): plan.publish(bundle): every slot of the bundle in one transition
//
// When bytes land is the destination's choice (FillOptions::copy_on_accept): `stream` copies
// each read as it is accepted (a slot is invisible until published); the pager holds every
// accepted read in its window until the whole bundle was accepted and then copies them all
// (its copy into the region is what makes bytes visible), at a time it chooses (land()).
//
// A rejection that is not StaleEpoch (a read from before a reset) or BundleFailed (a sibling
// of an earlier rejection) is fatal: the owner hears of it once per fill (on_rejected) and
// normally calls fail_closed(): no further read, copy or publication; accepted reads stay in
// their windows until close(), which drains the source, hands every completion to the Plan,
// releases every window and abandons the tickets whose completion never came.
//
// One thread (the owner's) calls everything here. Nothing allocates after construction.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/latency.hpp"
#include "plan/state.hpp"
#include "source/source.hpp"

namespace resid {

// What the source and the Plan's windows did over a run (run.json `source_stats`).
struct SourceReport {
  SourceEngine engine = SourceEngine::Direct;
  uint64_t windows = 0, depth = 0, alignment = 0, window_capacity = 0;
  SourceStats stats;
  uint64_t read_count = 0, read_p50_ns = 0, read_p99_ns = 0, read_max_ns = 0;  // submit -> reap
  uint64_t windows_free_at_close = 0;       // source windows FREE
  uint64_t plan_windows_free_at_close = 0;  // Plan windows FREE
  uint64_t tickets_outstanding_at_close = 0;
  uint64_t inflight_at_close = 0;           // reads the source still had
  uint64_t cancellations = 0;               // tickets abandoned (a read whose completion never came)
  bool alloc_counter_installed = false;
  uint64_t dynamic_allocations = 0;         // on the read path, after start
  uint64_t rejection_allocations = 0;       // building rejection and failure messages
};

class FillOwner {
 public:
  virtual ~FillOwner() = default;
  // Copy an accepted read's bytes (c.data) to order.dst; false fails the fill. `submit_ns`:
  // when the read was submitted (a fill's latency is submit to copied).
  virtual bool copy(uint32_t fill, const CopyOrder& order, const Completion& c, uint64_t submit_ns) = 0;
  // Every read of the fill was accepted (and, with copy_on_accept, copied): publish or land it.
  virtual void on_landed(uint32_t fill) = 0;
  // The fill's first fatal rejection (kind: the Plan's verdict; c: the source's completion).
  virtual void on_rejected(uint32_t fill, PlanError kind, const Completion& c) = 0;
  // A failed fill whose every issued read has completed: its record is free again.
  virtual void on_dropped(uint32_t fill) = 0;
  // The Plan or the source refused what the fill path asked (a bug, not a rejection);
  // fill is UINT32_MAX when no fill is concerned. The fill (if any) has failed.
  virtual void on_internal(uint32_t fill, const char* what, PlanError e) = 0;
};

struct FillOptions {
  bool copy_on_accept = true;
  uint32_t max_fills = 1;   // bundles tracked at once
  uint32_t max_objects = 1; // objects per bundle
  // Held while the read-latency histogram is written, for owners whose other threads read
  // it (read_latency() under the same mutex); null: only the owner's thread reads it.
  std::mutex* stats_mutex = nullptr;
  // Content identity: per manifest piece, the XXH64 (seed 0) of the bytes the piece must
  // hold. When given, every read whose extent is its piece's is hashed before the Plan sees
  // it; a difference makes it a ContentMismatch rejection (fatal: nothing of the bundle is
  // published). Null: no check.
  const std::vector<uint64_t>* piece_digests = nullptr;
};

struct FillCounters {
  uint64_t reads_issued = 0;
  uint64_t completions = 0;
  uint64_t accepted = 0;
  uint64_t invalidated = 0;  // StaleEpoch: read before a reset, retired as reset promised
  uint64_t dropped = 0;      // BundleFailed: a sibling of an earlier rejection
  uint64_t rejected = 0;     // fatal rejections
  uint64_t unmatched = 0;    // completions for a window holding no read of ours
  uint64_t content_checks = 0;      // reads whose bytes were hashed against their digest
  uint64_t content_check_ns = 0;    // time spent hashing them
  uint64_t content_mismatches = 0;
};

class FillPath {
 public:
  FillPath(Plan& plan, Source& source, FillOwner& owner, FillOptions opts);
  FillPath(const FillPath&) = delete;
  FillPath& operator=(const FillPath&) = delete;

  // Track a bundle the owner requested from the Plan, with its objects in bundle order.
  // Returns the fill index, or -1 when every fill record is in use (nothing changes).
  int track(BundleHandle bundle, const uint32_t* objects, uint32_t n);
  // Issue reads of tracked fills, oldest fill first, pieces in order, while the source has a
  // free window; at most `max`. Returns the reads issued (0 after fail_closed()).
  uint32_t issue(uint32_t max = UINT32_MAX);
  // Hand completions to the Plan: at most `max`, waiting for the first when `wait`.
  // Returns how many were handled.
  uint32_t reap(bool wait, uint32_t max = UINT32_MAX);
  // copy_on_accept = false: copy every landed read of the fill (owner.copy). False when a
  // copy failed (the fill has failed; the owner drops it) or the Plan refused one.
  bool land(uint32_t fill);
  // plan.publish of the fill's bundle; the record is free again on success.
  PlanError publish(uint32_t fill);
  // Free a fill's record without publishing (a failed fill whose reads all completed).
  void forget(uint32_t fill);
  // After plan.reset(): every fill is forgotten; their reads still in flight come back
  // StaleEpoch and only their windows are released.
  void forget_all();
  // After plan.reset() where reads are held in their windows until landed (the pager):
  // every landed read of a tracked fill is retired (StaleEpoch, nothing copied) and its
  // window released, then every fill is forgotten (forget_all).
  void retire_all();
  void fail_closed() { closed_ = true; }
  bool closed() const { return closed_; }
  // Drain, hand every outstanding completion to the Plan (nothing is copied), release every
  // window, abandon tickets whose completion never came. Returns the tickets abandoned.
  uint32_t close();

  // ---- observation ------------------------------------------------------------------------
  bool live(uint32_t fill) const { return fills_[fill].live; }
  bool failed(uint32_t fill) const { return fills_[fill].failed; }
  BundleHandle bundle(uint32_t fill) const { return fills_[fill].bundle; }
  uint32_t objects(uint32_t fill) const { return fills_[fill].n; }
  uint32_t object(uint32_t fill, uint32_t i) const { return fills_[fill].objects[i]; }
  // Reads of the fill that hold a window now (issued and not yet released).
  uint32_t windows_held(uint32_t fill) const { return fills_[fill].held; }
  // Every read of the fill issued and accepted.
  bool landed(uint32_t fill) const;
  // Reads issued and not yet handed to the Plan.
  uint32_t inflight() const { return inflight_; }
  // The fill of the read on window w (-1 when the window holds none of ours).
  int fill_of_window(int w) const;
  const FillCounters& counters() const { return c_; }
  // Submit -> reap time of every read (under FillOptions::stats_mutex when there is one).
  const LatencyHistogram& read_latency() const { return lat_; }
  // The slot of a read inside source.submit() now (-1: none) and since when: a blocking
  // read stuck in storage, for a watchdog on another thread.
  int64_t busy_slot() const { return busy_slot_.load(); }
  uint64_t busy_since_ns() const { return busy_since_ns_.load(); }

 private:
  struct Fill {
    bool live = false;
    bool failed = false;
    bool rejected = false;  // on_rejected was called
    uint32_t serial = 0;
    BundleHandle bundle = 0;
    uint32_t n = 0;
    std::vector<uint32_t> objects;  // capacity max_objects
    std::vector<int32_t> wins;      // windows of its reads, in issue order (held until landed)
    uint32_t next_obj = 0, next_piece = 0;  // the next read to issue
    uint32_t reads = 0, issued = 0, completed = 0, accepted = 0, copied = 0, held = 0;
  };
  struct WindowRead {
    bool busy = false;    // submitted, or accepted and held
    bool landed = false;  // accepted by the Plan: HOST_READY
    uint32_t fill = 0, serial = 0, piece = 0;
    uint64_t tag = 0;
    uint64_t submit_ns = 0;
    Completion comp;
  };

  bool issue_one(Fill& f, uint32_t fi);
  void handle(Completion&& c);
  void check_content(const WindowRead& r, Completion& c);
  void on_accepted(Fill& f, uint32_t fi, WindowRead& r, Completion&& c);
  void on_refused(Fill* f, uint32_t fi, PlanError e, Completion&& c);
  bool copy_one(uint32_t fi, WindowRead& r);
  void release(WindowRead& r, Fill* f, const Completion& c);
  void retire_landed(Fill& f, uint32_t fi);
  void maybe_dropped(Fill& f, uint32_t fi);
  Fill* fill_for(const WindowRead& r);

  Plan& plan_;
  Source& src_;
  FillOwner& owner_;
  FillOptions opts_;
  std::vector<Fill> fills_;
  std::vector<uint32_t> order_;  // live fills, oldest first
  std::vector<WindowRead> win_;  // per source window
  uint32_t serial_ = 0;
  uint32_t inflight_ = 0;
  bool closed_ = false;
  FillCounters c_;
  LatencyHistogram lat_;
  std::atomic<int64_t> busy_slot_{-1};
  std::atomic<uint64_t> busy_since_ns_{0};
};

}  // namespace resid
