// The filler: bundles through the fill path, their landing, publication and books; the
// close of the reads, the stall watchdog and the source report.
#include "pager/filler.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "pager/filler.hpp"

namespace resid {

Filler::Filler(PagerShared& sh, Region& region, Evictor& evictor, std::unique_ptr<Source> source, FaultQueue& faults)
    : sh_(sh), region_(region), evictor_(evictor), source_(std::move(source)), faults_(faults) {
  const uint32_t windows = static_cast<uint32_t>(source_->window_count());
  const uint32_t chunks = region_.chunks();
  {
    PlanConfig pc;
    pc.windows = windows;
    pc.slot_addresses.resize(chunks);
    for (ChunkId c = 0; c < chunks; ++c) pc.slot_addresses[c] = region_.base() + static_cast<uint64_t>(c) * sh_.cfg.chunk_size;
    pc.slot_bytes = sh_.cfg.chunk_size;
    pc.consumers = 1;  // open consumers: not a declared count
    pc.max_bundle = std::max<uint32_t>(1, std::min<uint32_t>(windows, chunks));
    pc.eager_reconcile = sh_.cfg.eager_reconcile;
    pc.open_consumers = true;
    sh_.plan = std::make_unique<Plan>(*sh_.manifest, std::move(pc));
  }
  FillOptions fo;
  fo.copy_on_accept = false;  // a copy into the region is a publication: only whole bundles
  fo.max_fills = windows;
  fo.max_objects = std::max<uint32_t>(1, std::min<uint32_t>(windows, chunks));
  fo.stats_mutex = &sh_.mu;
  fo.piece_digests = sh_.cfg.chunk_digests.empty() ? nullptr : &sh_.cfg.chunk_digests;  // one piece per chunk
  fill_ = std::make_unique<FillPath>(*sh_.plan, *source_, static_cast<FillOwner&>(*this), fo);
  bundles_.resize(windows);
  for (auto& b : bundles_) b.chunks.reserve(windows);
  cur_mark_.assign(chunks, 0);
  ra_chunks_.reserve(windows);
  req_slots_.resize(windows);
  req_tags_.resize(windows);
  rejection_.bundle.reserve(windows);
  candidates_.reserve(64);
}

void Filler::start() {
  // The uring engine signals completions on an eventfd the fault loop polls with the
  // userfaultfd; the blocking engines complete inside submit().
  cfd_ = source_->completion_fd();
  blocking_ = cfd_ < 0;
}

uint32_t Filler::free_windows() const {
  const size_t depth = source_->max_inflight(), inflight = fill_->inflight();
  const size_t room = inflight >= depth ? 0 : depth - inflight;
  return static_cast<uint32_t>(std::min(source_->windows_free(), room));
}

int Filler::begin_bundle_locked(FillKind kind, const ChunkId* cs, uint32_t n) {
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

bool Filler::reap_completions() {
  if (fill_->inflight() == 0) return false;
  const uint32_t n = fill_->reap(false);
  if (n > 0) snapshot_source_stats();
  return n > 0;
}

bool Filler::copy(uint32_t, const CopyOrder& order, const Completion& c, uint64_t submit_ns) {
  const ChunkId ch = sh_.manifest->piece(order.piece).object;  // one object per chunk
  const uint64_t len = region_.chunk_length(ch), got = c.extent.length;
  // The tail chunk publishes whole pages: zero the window's bytes past the file end.
  if (len > got) std::memset(c.data + got, 0, len - got);
  if (!region_.publish(ch, c.data, got)) return false;
  std::lock_guard lk(sh_.mu);
  fill_hist_.record(now_ns() - submit_ns);  // the read and the copy
  return true;
}

void Filler::snapshot_source_stats() {
  std::lock_guard lk(sh_.mu);
  snapshot_source_stats_locked();
}

// Copied, so readers never race the pager thread.
void Filler::snapshot_source_stats_locked() {
  src_stats_ = source_->stats();
  const FillCounters& fc = fill_->counters();
  sh_.st.content_checks = fc.content_checks;
  sh_.st.content_check_ns = fc.content_check_ns;
  sh_.st.content_mismatches = fc.content_mismatches;
}

void Filler::on_landed(uint32_t fi) {
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

void Filler::on_rejected(uint32_t fi, PlanError kind, const Completion& c) {
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

void Filler::on_dropped(uint32_t fi) { drop_bundle(bundles_[fi]); }

void Filler::on_internal(uint32_t fi, const char* what, PlanError e) {
  const ChunkId c = fi < bundles_.size() && !bundles_[fi].chunks.empty() ? bundles_[fi].chunks[0] : 0;
  sh_.fail_with([&] {
    return std::string("internal: ") + what + (fi < bundles_.size() ? " (bundle of chunk " + std::to_string(c) + ")" : "") +
           (e == PlanError::None ? "" : std::string(": ") + to_string(e));
  });
}

void Filler::publish_bundle(BundleRun& b, uint32_t fi) {
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
  if (sh_.cfg.eager_reconcile) region_.reconcile_locked();
  // The waiters' accounting; the wakes follow (DONTWAKE above: a woken thread finds the
  // fill in the books).
  const uint64_t t = now_ns();
  for (ChunkId c : b.chunks)
    if (sh_.books[c].state == ChunkState::Resident) faults_.wake_waiters_locked(c, t, b.kind);
  b.live = false;
  lk.unlock();
  for (ChunkId c : b.chunks) {
    if (sh_.books[c].mapped_pages == 0) continue;
    region_.wake_chunk(c);
    region_.maybe_collapse(c);
  }
}

// A published chunk in the pager's books: resident (or, unmapped meanwhile, gone at once),
// counted, traced, and told to the policy.
void Filler::book_fill_locked(ChunkId c, FillKind kind) {
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

void Filler::drop_bundle(BundleRun& b) {
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

void Filler::close_reads() {
  // A failed run may leave reads in flight and accepted reads waiting for their bundle: the
  // fill path drains the source, hands every completion to the Plan (nothing is copied or
  // published), gives the windows back, and abandons the tickets whose completion never
  // came. Then the Plan shuts down (refused while a consumer holds a slot).
  const uint32_t abandoned = fill_->close();
  std::lock_guard lk(sh_.mu);
  cancellations_ += abandoned;
  forget_bundles_locked(false);
  sh_.plan_shutdown = sh_.plan->shutdown();
}

void Filler::check_stall() {
  const int64_t c = fill_->busy_slot();  // slot c is chunk c
  if (c < 0 || sh_.failed) return;
  const uint64_t since = fill_->busy_since_ns();
  const uint64_t now = now_ns();
  if (now <= since || now - since < static_cast<uint64_t>(sh_.cfg.watchdog_s * 1e9)) return;
  if (fill_->busy_slot() != c || fill_->busy_since_ns() != since) return;  // moved on meanwhile
  RejectionPathScope scope;
  std::string ev;
  {
    std::lock_guard lk(sh_.mu);
    ev = sh_.evidence_locked();
  }
  sh_.fail("watchdog: the fill of chunk " + std::to_string(c) + " has been in the " + to_string(source_->engine()) +
           " source for more than " + std::to_string(sh_.cfg.watchdog_s) + " s (storage not answering); " + ev);
}

SourceReport Filler::report_locked(bool closed) const {
  SourceReport r;
  r.engine = source_->engine();
  r.windows = source_->window_count();
  r.depth = source_->max_inflight();
  r.alignment = source_->alignment();
  r.window_capacity = source_->window_capacity();
  r.stats = src_stats_;  // the pager thread's copy (the source itself is the pager thread's)
  const LatencyHistogram& reads = fill_->read_latency();  // written under mu
  r.read_count = reads.count();
  r.read_p50_ns = reads.quantile(0.5);
  r.read_p99_ns = reads.quantile(0.99);
  r.read_max_ns = reads.max();
  const PlanBalance bal = sh_.plan->balance();
  // Before the pager closed (a failed run that left threads in faults), the Plan's count.
  r.windows_free_at_close = closed ? closed_windows_free_ : bal.windows_free;
  r.plan_windows_free_at_close = bal.windows_free;
  r.tickets_outstanding_at_close = bal.live_tickets;
  r.cancellations = cancellations_;
  return r;
}

}  // namespace resid
