#include "drivers/common/pager_arm.hpp"

#include <cstring>
#include <string>

#include "core/errors.hpp"
#include "core/run_record.hpp"
#include "drivers/common/content_digests.hpp"
#include "drivers/common/record.hpp"

namespace resid {

bool is_generate_driver_fault(FaultCell f) {
  return f == FaultCell::HeldConsumer || f == FaultCell::ResetOutstanding || f == FaultCell::ShutdownLiveConsumer ||
         f == FaultCell::RecycleLive;
}

// ---- flags ---------------------------------------------------------------------------------

void check_pager_arm(const PagerArmConfig& c, uint32_t max_threads, const char* subcommand) {
  if (c.chunk_size == 0 || c.chunk_size % 4096 != 0)
    throw InputError("--chunk-size " + std::to_string(c.chunk_size) + " is not a positive multiple of 4096");
  if (c.threads == 0 || c.threads > max_threads)
    throw InputError("--threads must be in 1.." + std::to_string(max_threads));
  if (!(c.watchdog_s > 0)) throw InputError("--watchdog-s must be positive");
  if (c.arm == Arm::PagerPrefetch && c.prefetch_depth == 0)
    throw InputError("--prefetch-depth must be at least 1 for pager-prefetch");
  if (c.arm == Arm::PagerLruK && std::string_view(subcommand) != "generate")
    throw InputError(std::string("arm pager-lru-k groups chunks by the llama adapter's layers: only `generate` takes it, not `") +
                     subcommand + "` (its region has no layers)");
  if (c.arm == Arm::PagerLruK && c.lru_k == 0) throw InputError("--lru-k (at least 1) is required for arm pager-lru-k");
  if (c.arm != Arm::PagerLruK && c.lru_k != 0)
    throw InputError("--lru-k applies only to arm pager-lru-k, not " + std::string(to_string(c.arm)));
  check_source_flags(c.source, c.windows, c.depth);
  check_pager_fault(c.fault, c.arm, c.source, subcommand);
}

void check_pager_fault(const FaultSpec& spec, Arm arm, SourceEngine source, const char* subcommand) {
  if (!spec.active()) return;
  const std::string cell = to_string(spec.cell), sub = subcommand;
  const bool generate = sub == "generate";
  const std::string here = std::string("short-read, eio, stale-completion, wrong-object, bundle-extent-failure, "
                                       "out-of-order, stall") +
                           (generate ? ", held-consumer, reset-outstanding, shutdown-live-consumer, recycle-live" : "");
  if (arm == Arm::KernelMmap)
    throw InputError("--fault " + cell + " needs a pager arm: kernel-mmap reads through the kernel's mapping, not a source");
  if (!is_source_fault(spec.cell) && !(generate && is_generate_driver_fault(spec.cell)))
    throw InputError("--fault " + cell + " does not apply to " + sub + "; its cells are " + here);
  if (spec.cell == FaultCell::BundleExtentFailure && source != SourceEngine::Uring)
    throw InputError("--fault bundle-extent-failure needs read-ahead bundles of several reads (--source uring)");
}

FaultySourceHandle open_pager_source(const PagerArmConfig& c, const std::string& path) {
  return with_fault(open_source(c.source, path, c.chunk_size, source_options(c.source, c.windows, c.depth)), c.fault);
}

// ---- budget ----------------------------------------------------------------------------------

PagerBudget pager_budget(const PagerArmConfig& c, const Source& src, uint64_t chunks, uint64_t min_chunks,
                         uint64_t reserve_chunks, const std::string& why_min) {
  if (!c.budget_bytes) throw InputError("--budget-bytes is required for arm " + std::string(to_string(c.arm)));
  PagerBudget b;
  // The pager pays for its own memory out of the weight budget: its windows (F: all N of
  // them) and the page-table pages that map its region (they stay charged after DONTNEED).
  b.window_bytes = src.window_bytes();
  b.page_table_bytes = Pager::page_table_reserve(chunks * c.chunk_size);
  b.min_chunks = min_chunks;
  b.reserve_chunks = reserve_chunks;
  const uint64_t own = b.own_bytes(), budget = *c.budget_bytes;
  const uint64_t min_bytes = (min_chunks + reserve_chunks) * c.chunk_size + own;
  if (budget < own)
    throw InputError("--budget-bytes " + std::to_string(budget) + " does not even cover the pager's window and page tables (" +
                     std::to_string(own) + " bytes); the smallest accepted is " + std::to_string(min_bytes));
  const uint64_t whole = (budget - own) / c.chunk_size;
  b.budget_chunks = whole >= reserve_chunks ? whole - reserve_chunks : 0;
  if (b.budget_chunks < min_chunks)
    throw InputError("--budget-bytes " + std::to_string(budget) + " leaves " + std::to_string(b.budget_chunks) +
                     " chunk(s) after the pager's own " + std::to_string(own) + " bytes" +
                     (reserve_chunks ? " and the collapse reserve" : "") + "; " + to_string(c.arm) + " needs at least " +
                     std::to_string(min_chunks) + " (" + why_min + ") (--budget-bytes >= " + std::to_string(min_bytes) + ")");
  return b;
}

PagerConfig base_pager_config(const PagerArmConfig& c, uint64_t budget_chunks, uint64_t file_bytes) {
  PagerConfig pc;
  pc.chunk_size = c.chunk_size;
  pc.budget_chunks = budget_chunks;
  // A calibration run touches no weight byte, so it must not prefetch or read ahead one either.
  pc.prefetch_depth = c.arm == Arm::PagerPrefetch && !c.calibrate ? c.prefetch_depth : 0;
  pc.eager_reconcile = c.eager_reconcile;
  pc.watchdog_s = c.watchdog_s;
  pc.readahead = c.source == SourceEngine::Uring && !c.calibrate;  // F: the coming steps are read ahead
  pc.readahead_steps_ahead = c.readahead_steps;
  pc.protect = c.protect;
  pc.thread_nice = c.pager_nice;
  if (!c.content_digests.empty()) pc.chunk_digests = load_chunk_digests(c.content_digests, file_bytes, c.chunk_size);
  return pc;
}

// ---- the watch -------------------------------------------------------------------------------

void RunMonitor::workload_done() {
  std::lock_guard lk(mu_);
  done_ = true;
  cv_.notify_all();
}

void RunMonitor::pager_failed() {
  std::lock_guard lk(mu_);
  failed_ = true;
  cv_.notify_all();
}

std::string RunMonitor::watch(Pager* pager, const std::function<std::string()>& check, std::chrono::milliseconds grace) {
  std::unique_lock lk(mu_);
  while (!cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return done_ || failed_; })) {
    lk.unlock();
    // The pager watches its own queue; a fill stuck in storage is watched from here.
    if (pager) pager->check_stall();
    std::string why = check ? check() : std::string();
    lk.lock();
    if (!why.empty()) return why;
  }
  if (done_) return {};
  // The workload may still finish (its threads were not waiting on what failed): give it
  // `grace`, unless the pager shows a thread blocked in a fault it will never serve; then
  // leave with the evidence.
  const auto until = std::chrono::steady_clock::now() + grace;
  while (!done_ && !pager->faults_stranded() && std::chrono::steady_clock::now() < until)
    cv_.wait_for(lk, std::chrono::milliseconds(10));
  return done_ ? std::string() : "pager: " + pager->error();
}

// ---- verdict ---------------------------------------------------------------------------------

namespace {

// Why a run whose pager shut down is not cleanly closed ("" when it is).
std::string close_error(const Pager& p) {
  const Plan& plan = p.plan();
  const PlanCounters c = plan.counters();
  if (c.reconcile_violations > 0)
    return "plan reconcile: " + std::to_string(c.reconcile_violations) + " invariant violation(s); first: " +
           plan.first_violation();
  const auto shut = p.plan_shutdown();
  if (shut && *shut != PlanError::None) return std::string("plan: shutdown refused (") + to_string(*shut) + ")";
  const SourceReport r = p.source_report();
  if (r.tickets_outstanding_at_close != 0 || r.plan_windows_free_at_close != r.windows ||
      r.windows_free_at_close != r.windows)
    return "unbalanced at close: " + std::to_string(r.tickets_outstanding_at_close) + " ticket(s) outstanding, " +
           std::to_string(r.plan_windows_free_at_close) + "/" + std::to_string(r.windows) + " Plan windows and " +
           std::to_string(r.windows_free_at_close) + "/" + std::to_string(r.windows) + " source windows free";
  return {};
}

// A fatal source cell or a stall must fail the run; out-of-order must fire and recover; a
// cell that never fired is no evidence either way.
std::string fault_error(const PagerArmConfig& c, const FaultReport* f) {
  if (!f || c.calibrate) return {};
  const std::string cell = to_string(c.fault.cell);
  if (!f->fired) return "fault " + cell + " did not fire (no eligible point at or after " + std::to_string(c.fault.at) + ")";
  if (c.fault.cell != FaultCell::OutOfOrder) return "fault " + cell + " fired but the run did not fail";
  return {};
}

}  // namespace

std::string pager_verdict(const Pager* pager, const PagerVerdict& v, const PagerArmConfig& c, const FaultReport* fault) {
  if (!v.workload.empty()) return v.workload;
  if (pager && pager->failed()) return "pager: " + pager->error();
  if (!v.audit.empty()) return v.audit;
  if (pager && pager->stats().reconcile_mismatches > 0)
    return "reconcile: " + std::to_string(pager->stats().reconcile_mismatches) +
           " mismatch(es) between the pager's books and mincore or the Plan; first: " + pager->first_mismatch();
  if (pager)
    if (std::string e = close_error(*pager); !e.empty()) return e;
  if (!v.control.empty()) return v.control;
  return fault_error(c, fault);
}

// ---- run.json sections -------------------------------------------------------------------

nlohmann::json pager_run_head(const char* subcommand, const std::string& error, const PagerArmConfig& c,
                              const Pager* p) {
  const auto policy = policy_of(c.arm);
  nlohmann::json j;
  j["schema_version"] = kRunSchemaVersion;
  j["subcommand"] = subcommand;
  j["status"] = error.empty() ? "ok" : "failed";
  j["error"] = or_null(error);
  j["arm"] = to_string(c.arm);
  j["policy"] = policy ? nlohmann::json(to_string(*policy)) : nlohmann::json(nullptr);
  j["policy_k"] = c.arm == Arm::PagerLruK ? nlohmann::json(c.lru_k) : nlohmann::json(nullptr);
  j["source_engine"] = p ? nlohmann::json(to_string(p->source().engine())) : nlohmann::json(nullptr);
  j["uffd_mode"] = p ? nlohmann::json(to_string(p->uffd_mode())) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json pager_config_json(const PagerArmConfig& c) {
  const SourceOptions so = source_options(c.source, c.windows, c.depth);
  return {{"out", c.out},
          {"arm", to_string(c.arm)},
          {"budget_bytes", c.budget_bytes ? nlohmann::json(*c.budget_bytes) : nlohmann::json(nullptr)},
          {"chunk_size", c.chunk_size},
          {"threads", c.threads},
          {"source", to_string(c.source)},
          {"windows", so.windows},
          {"depth", so.depth},
          {"prefetch_depth", c.prefetch_depth},
          {"readahead_steps", c.readahead_steps},
          {"eager_reconcile", c.eager_reconcile},
          {"watchdog_s", c.watchdog_s},
          {"calibrate", c.calibrate},
          {"fault", c.fault.active() ? nlohmann::json(to_string(c.fault)) : nlohmann::json(nullptr)},
          {"content_digests", or_null(c.content_digests)},
          {"protect", c.protect},
          {"lru_k", c.arm == Arm::PagerLruK ? nlohmann::json(c.lru_k) : nlohmann::json(nullptr)},
          {"pager_nice", or_null(c.pager_nice)}};
}

nlohmann::json pager_budget_json(const PagerArmConfig& c, const PagerBudget& b, const std::optional<uint64_t>& chunks) {
  return {{"budget_bytes", c.budget_bytes ? nlohmann::json(*c.budget_bytes) : nlohmann::json(nullptr)},
          {"window_bytes", b.window_bytes},
          {"page_table_bytes", b.page_table_bytes},
          {"budget_chunks", chunks ? nlohmann::json(*chunks) : nlohmann::json(nullptr)},
          {"min_budget_chunks", b.min_chunks},
          {"reserve_chunks", b.reserve_chunks}};
}

nlohmann::json pager_counters_json(const AccessCounts& a, const Pager* p) {
  const PagerStats ps = p ? p->stats() : PagerStats{};
  const SourceStats ss = p ? p->source_stats() : SourceStats{};
  return {{"steps", a.steps},
          {"accesses", a.accesses},
          {"hits", a.accesses - a.misses},
          {"misses", a.misses},
          {"signals", a.signals},
          {"demand_fills", ps.demand_fills},
          {"prefetch_fills", ps.prefetch_fills},
          {"prefetch_used", ps.prefetch_used},
          {"evictions", ps.evictions},
          {"faults_handled", ps.faults_handled},
          {"spurious_faults", ps.spurious_faults},
          {"logical_bytes_read", ss.logical_bytes},
          {"physical_bytes_read", a.physical_bytes_read},
          {"max_resident_chunks", ps.max_resident_chunks},
          {"unmapped_chunks", ps.unmapped_chunks},
          {"reconcile_checks", ps.reconcile_checks},
          {"reconcile_mismatches", ps.reconcile_mismatches},
          {"oversize_steps", ps.oversize_steps},
          {"pin_moves", ps.pin_moves},
          {"max_pins", ps.max_pins},
          {"in_step_refills", ps.in_step_refills},
          // Threads blocked in faults: over every fault message (one per blocked thread), the
          // time from reading it to the wake.
          {"exposed_source_wait_ns", ps.exposed_wait_ns},
          {"waited_faults", ps.waited_faults},
          {"plan_recycle_refusals", ps.plan_recycle_refusals},
          {"consumed_early", ps.consumed_early},
          // Faults ahead of the cursor (scan): demand faults that waited for the signal of
          // the step before theirs, so their victims were chosen at their own step's cursor.
          {"deferred_faults", ps.deferred_faults},
          // Content identity: fills hashed against their chunk's digest, and the time it took.
          {"content_checks", ps.content_checks},
          {"content_check_ns", ps.content_check_ns},
          {"content_mismatches", ps.content_mismatches}};
}

nlohmann::json pager_latency_json(const Pager* p) {
  const PagerStats ps = p ? p->stats() : PagerStats{};
  // fault_*: every exposed wait; demand_fault_*: the faults that read their own chunk.
  return {{"fault_count", ps.fault_count}, {"fault_p50", ps.fault_p50_ns}, {"fault_p99", ps.fault_p99_ns},
          {"fault_max", ps.fault_max_ns}, {"demand_fault_count", ps.demand_fault_count},
          {"demand_fault_p50", ps.demand_fault_p50_ns}, {"demand_fault_p99", ps.demand_fault_p99_ns},
          {"demand_fault_max", ps.demand_fault_max_ns},
          {"fill_p50", ps.fill_p50_ns},   {"fill_p99", ps.fill_p99_ns}};
}

nlohmann::json pager_thread_json(const Pager* p) {
  const PagerThreadStats t = p ? p->stats().thread : PagerThreadStats{};
  if (!t.started) return nullptr;
  return {{"nice_requested", or_null(t.nice_requested)},
          {"nice", t.nice},
          {"nice_error", t.nice_errno ? nlohmann::json(std::strerror(t.nice_errno)) : nlohmann::json(nullptr)}};
}

void add_pager_sections(nlohmann::json& j, const Pager* p, const PagerArmConfig& c, const FaultReport* fault) {
  const SourceReport r = p ? p->source_report() : SourceReport{};
  j["source_stats"] = source_stats_json(p ? &r : nullptr);
  j["plan"] = p ? plan_json(PlanRecord{p->plan(), p->plan_shutdown(), "one per chunk (its file extent)", std::nullopt})
                : nlohmann::json(nullptr);
  if (p) {
    const PagerStats s = p->stats();
    j["readahead"] = {{"steps_ahead", c.readahead_steps},
                      {"bundles", s.readahead_bundles},
                      {"chunks", s.readahead_fills},
                      {"waited_faults", s.readahead_waits},
                      {"room_waits", s.readahead_no_room},
                      {"max_steps_ahead", s.readahead_max_ahead},
                      {"bundles_published", s.bundles_published}};
  } else {
    j["readahead"] = nullptr;
  }
  j["fault"] = fault_json(c.fault, fault);
  j["pager_thread"] = pager_thread_json(p);
  // Reclaim authority: what of the region is mlocked when the record is written.
  const std::optional<uint64_t> locked = p ? p->region_locked_bytes() : std::nullopt;
  j["protect"] = {{"on", c.protect}, {"locked_bytes", locked ? nlohmann::json(*locked) : nlohmann::json(nullptr)}};
  const PagerRejectionReport rej = p ? p->rejection_report() : PagerRejectionReport{};
  j["rejection"] = !rej.any ? nlohmann::json(nullptr)
                            : nlohmann::json{{"kind", to_string(rej.kind)},
                                             {"step", rej.step},
                                             {"bundle", rej.bundle},
                                             {"bundle_chunks_published", rej.bundle_chunks_published}};
}

}  // namespace resid
