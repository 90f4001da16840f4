#include "pager/pager.hpp"

#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/clock.hpp"
#include "core/errors.hpp"

#include "pager/pager_internal.hpp"

namespace resid {

Pager::Pager(std::unique_ptr<Source> source, std::unique_ptr<Policy> policy, PagerConfig cfg,
             Trace* trace)
    : sh_(std::move(cfg), std::move(policy), trace), audit_(0) {
  if (!source || !sh_.policy) throw std::invalid_argument("pager needs a source and a policy");
  const Region::Geometry g = Region::geometry(sh_.cfg, *source);
  build_chunk_manifest(g, *source);
  region_ = std::make_unique<Region>(sh_, g);
  evictor_ = std::make_unique<Evictor>(sh_, *region_);
  faults_ = std::make_unique<FaultHandler>(sh_, *region_, *evictor_);
  region_->set_event_reader([this] { faults_->read_messages(); });
  // Sized once: the fault loop never allocates.
  sh_.pins.reserve(sh_.cfg.max_pins);
  audit_ = sh_.cfg.step_chunks.empty() ? SignalAudit(g.chunks) : SignalAudit(g.chunks, sh_.cfg.step_chunks);
  filler_ = std::make_unique<Filler>(sh_, *region_, *evictor_, std::move(source), *faults_);
  faults_->attach(*filler_);
}

void Pager::build_chunk_manifest(const Region::Geometry& g, const Source& source) {
  // The Plan's manifest: one object per chunk, its file extent (the tail chunk is short).
  std::vector<PlanObjectSpec> specs(g.chunks);
  for (ChunkId c = 0; c < g.chunks; ++c) {
    const uint64_t off = static_cast<uint64_t>(c) * sh_.cfg.chunk_size;
    specs[c].name = "chunk." + std::to_string(c);
    specs[c].extents.push_back({off, std::min(sh_.cfg.chunk_size, g.file_bytes - off)});
  }
  sh_.manifest = std::make_unique<PlanManifest>(
    PlanManifest::build(std::move(specs), g.file_bytes, source.alignment(), source.window_capacity()));
}

Pager::~Pager() {
  try {
    shutdown();
  } catch (...) {
  }
  // Before the filler's source unmaps its windows (Region::release_windows).
  if (region_) region_->release_windows();
}

uint64_t Pager::chunk_length(ChunkId c) const { return region_->chunk_length(c); }

void Pager::start() { faults_->start(); }

void Pager::shutdown(const std::function<void()>& quiesce) { faults_->shutdown(quiesce); }

PlanResult<uint32_t> Pager::reset() { return faults_->reset(); }

PlanError Pager::try_plan_shutdown() { return faults_->try_plan_shutdown(); }

void Pager::check_stall() { filler_->check_stall(); }

bool Pager::faults_stranded() const { return faults_->faults_stranded(); }

// ---- driver-facing calls ------------------------------------------------------------

void Pager::enter(ChunkId c) {
  if (c >= region_->chunks()) throw std::out_of_range("enter: chunk out of range");
  std::lock_guard lk(sh_.mu);
  ++sh_.books[c].consumers;
  sh_.plan->hold(static_cast<int32_t>(c));  // ShutDown after the pager shut down: nothing to hold
  sh_.policy->on_access(c);
  if (sh_.books[c].state != ChunkState::Absent && sh_.books[c].prefetched_unused) {
    sh_.books[c].prefetched_unused = 0;
    ++sh_.st.prefetch_used;
  }
}

void Pager::leave(ChunkId c) { leave_impl(c, false); }

void Pager::leave_consumed(ChunkId c) { leave_impl(c, true); }

void Pager::leave_impl(ChunkId c, bool consumed) {
  if (c >= region_->chunks()) throw std::out_of_range("leave: chunk out of range");
  {
    std::lock_guard lk(sh_.mu);
    if (sh_.books[c].consumers <= 0) throw std::logic_error("leave without enter on chunk " + std::to_string(c));
    --sh_.books[c].consumers;
    sh_.plan->unhold(static_cast<int32_t>(c));
    if (consumed) {
      sh_.policy->on_consumed(c);
      ++sh_.st.consumed_early;
    }
  }
  faults_->leave_notify();
}

void Pager::signal(uint64_t cursor) { step_boundary(cursor, UINT64_MAX); }

void Pager::set_readahead_horizon(uint64_t last_step) {
  std::lock_guard lk(sh_.mu);
  filler_->set_readahead_horizon_locked(last_step);
}

void Pager::set_step(uint64_t step) { step_boundary(std::nullopt, step); }

void Pager::set_step_oversize(bool oversize) {
  std::lock_guard lk(sh_.mu);
  evictor_->set_mode_locked(oversize);
  if (oversize) ++sh_.st.oversize_steps;
}

void Pager::set_loading() {
  std::lock_guard lk(sh_.mu);
  evictor_->set_mode_locked(true);
}

void Pager::step_boundary(std::optional<uint64_t> cursor, uint64_t next_step, bool oversize) {
  {
    std::lock_guard lk(sh_.mu);
    if (cursor) {
      sh_.policy->on_signal(*cursor);
      audit_.record(*cursor);
      ++sh_.st.signals;
      sh_.signal_next = std::max(sh_.signal_next, *cursor + 1);
      if (sh_.trace) {
        if (sh_.cfg.step_chunks.empty()) {
          sh_.trace->append(sh_.step, static_cast<uint32_t>(*cursor % region_->chunks()), TraceKind::Signal);
        } else {
          for (ChunkId c : sh_.cfg.step_chunks[*cursor % sh_.cfg.step_chunks.size()])
            sh_.trace->append(sh_.step, c, TraceKind::Signal);
        }
      }
    }
    if (next_step != UINT64_MAX) {
      sh_.step = next_step;
      evictor_->set_mode_locked(oversize);
      if (oversize) ++sh_.st.oversize_steps;
    }
  }
  // The prefetch horizon moved; a new step has a new read-ahead bundle; a deferred fault may
  // be due (deferred_waiting_ is set under sh_.mu, so a signal after the deferral sees it).
  if ((cursor && (sh_.cfg.prefetch_depth > 0 || faults_->deferred_waiting())) ||
      (sh_.cfg.readahead && next_step != UINT64_MAX))
    faults_->notify();
}

void Pager::release_ahead_faults() { faults_->release_ahead_faults(); }

bool Pager::demand_filled_in(ChunkId c, uint64_t step) const {
  std::lock_guard lk(sh_.mu);
  return c < region_->chunks() && sh_.books[c].last_demand_step == static_cast<int64_t>(step);
}

bool Pager::resident(ChunkId c) const {
  std::lock_guard lk(sh_.mu);
  return c < region_->chunks() && sh_.books[c].state == ChunkState::Resident;
}

uint64_t Pager::fills_of(ChunkId c) const {
  std::lock_guard lk(sh_.mu);
  return sh_.books.at(c).fills;
}

std::string Pager::error() const {
  std::lock_guard lk(sh_.mu);
  return sh_.error;
}

void Pager::set_failure_callback(std::function<void()> cb) {
  std::lock_guard lk(sh_.mu);
  sh_.on_failure = std::move(cb);
}

PagerStats Pager::stats() const {
  std::lock_guard lk(sh_.mu);
  PagerStats s = sh_.st;
  s.resident_chunks = sh_.books.resident().size();
  s.signals_out_of_order = audit_.out_of_order();
  faults_->add_latency_locked(s);
  const LatencyHistogram& fills = filler_->fill_latency_locked();
  s.fill_count = fills.count();
  s.fill_p50_ns = fills.quantile(0.5);
  s.fill_p99_ns = fills.quantile(0.99);
  s.fill_max_ns = fills.max();
  return s;
}

SourceStats Pager::source_stats() const {
  std::lock_guard lk(sh_.mu);
  return filler_->source_stats_locked();
}

SignalAudit Pager::audit() const {
  std::lock_guard lk(sh_.mu);
  return audit_;
}

std::vector<ChunkId> Pager::resident_set() const {
  std::lock_guard lk(sh_.mu);
  auto v = sh_.books.resident();
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<ChunkId> Pager::pinned_set() const {
  std::lock_guard lk(sh_.mu);
  std::vector<ChunkId> v;
  for (ChunkId c = 0; c < region_->chunks(); ++c)
    if (sh_.books[c].pins > 0) v.push_back(c);
  return v;
}

PlanError Pager::try_recycle(ChunkId c) {
  if (c >= region_->chunks()) return PlanError::InvalidArgument;
  std::lock_guard lk(sh_.mu);
  return evictor_->try_recycle_locked(c);
}

void Pager::pause(bool on) { faults_->pause(on); }

// ---- failure ------------------------------------------------------------------------

std::optional<PlanError> Pager::plan_shutdown() const {
  std::lock_guard lk(sh_.mu);
  return sh_.plan_shutdown;
}

SourceReport Pager::source_report() const {
  std::lock_guard lk(sh_.mu);
  SourceReport r = filler_->report_locked(faults_->closed_locked());
  faults_->add_allocations_locked(r);
  return r;
}

PagerRejectionReport Pager::rejection_report() const {
  std::lock_guard lk(sh_.mu);
  return filler_->rejection_locked();
}

uint64_t Pager::page_table_reserve(uint64_t mapped_bytes) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t pte_span = page / 8 * page;          // 512 entries x 4 KiB = 2 MiB
  const uint64_t pmd_span = page / 8 * pte_span;      // 1 GiB
  return ((mapped_bytes + pte_span - 1) / pte_span + (mapped_bytes + pmd_span - 1) / pmd_span) * page;
}

std::optional<uint64_t> Pager::region_huge_bytes() const { return region_->smaps_bytes("AnonHugePages:"); }

std::optional<uint64_t> Pager::region_locked_bytes() const { return region_->smaps_bytes("Locked:"); }

}  // namespace resid
