// `residctl stream`'s verdict and run.json (docs/run-contract.md, `stream`).
#include <cstdio>

#include "core/run_record.hpp"
#include "drivers/common/record.hpp"
#include "drivers/stream/stream_run.hpp"
#include "source/window.hpp"

namespace resid {

namespace {

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}


std::string consumer_error(const StreamShared& sh) {
  return "consumer at step " + std::to_string(sh.consumer_error_step.load()) + ": " +
         to_string(static_cast<PlanError>(sh.consumer_error.load())) + (sh.consumer_watchdog.load() ? " (watchdog)" : "");
}

// The rejection a fatal cell must produce.
PlanError expected_rejection(FaultCell f) {
  switch (f) {
    case FaultCell::ShortRead: return PlanError::ShortRead;
    case FaultCell::Eio:
    case FaultCell::BundleExtentFailure: return PlanError::ReadFailed;
    case FaultCell::StaleCompletion: return PlanError::StaleGeneration;
    case FaultCell::WrongObject: return PlanError::WrongObject;
    default: return PlanError::None;
  }
}

}  // namespace

StreamRun::~StreamRun() {
  producer.reset();
  shared.reset();
  plan.reset();
  if (arena) free_aligned_buffer(arena, arena_bytes);
}

std::string StreamRun::object_name(uint32_t o) const {
  return manifest && o < m().object_count() ? m().object(o).name : std::string("?");
}

int64_t StreamRun::faulted_bundle() const {
  if (!fault_report || !fault_report->fired || !fault_is_fatal(cfg.fault.cell)) return -1;
  return static_cast<int64_t>(lay.step_of_read(fault_report->read) / lay.bundle);
}

bool StreamRun::balanced() const {
  return close.balance.balanced() && close.source_inflight == 0 && close.source_windows_free == src->window_count();
}

std::string StreamRun::rejection_text() const {
  const RejectionRecord& rej = close.rejection;
  if (rej.kind == PlanError::None) return {};
  std::string t = std::string(to_string(rej.kind)) + " completion for object '" + object_name(rej.object) + "' (piece " +
                  std::to_string(rej.piece) + ", window " + std::to_string(rej.window) + ", slot " +
                  std::to_string(rej.slot) + ", generation " + std::to_string(rej.generation) + ", epoch " +
                  std::to_string(rej.epoch) + ")";
  if (rej.kind == PlanError::WrongObject && rej.claimed_object != UINT32_MAX)
    t += " carried the bytes of object '" + object_name(rej.claimed_object) + "'";
  if (rej.kind == PlanError::StaleGeneration) t += ": tag " + hex64(rej.tag) + " is not the window's live ticket";
  return t;
}

std::string StreamRun::error() const {
  const StreamProducer& p = *producer;
  const StreamShared& sh = *shared;
  const StreamClose& c = close;
  std::string e;
  if (!c.exception_error.empty()) {
    e = "internal: " + c.exception_error;
  } else if (p.failing && p.fail_kind != PlanError::None) {
    e = "rejected " + rejection_text() + (p.fail_source_error.empty() ? "" : " (" + p.fail_source_error + ")") +
        "; nothing of its bundle was published";
  } else if (p.failing) {
    e = std::string(p.internal ? p.internal : "failed");
    if (p.internal_kind != PlanError::None) e += std::string(" (") + to_string(p.internal_kind) + ")";
    if (sh.consumer_error.load()) e += ": " + consumer_error(sh);
  } else if (sh.consumer_error.load()) {
    e = consumer_error(sh);
  } else if (sh.mismatches.load() > 0) {
    const int64_t s = sh.first_mismatch_step.load();
    e = "verify: " + std::to_string(sh.mismatches.load()) + " object(s) differ from the file; first at step " +
        std::to_string(s) + " (object '" + object_name(lay.step_object[static_cast<size_t>(s)]) + "')";
  } else if (c.counters.reconcile_violations > 0) {
    e = "reconcile: " + std::to_string(c.counters.reconcile_violations) + " invariant violation(s); first: " +
        plan->first_violation();
  } else if (c.shutdown_error != PlanError::None) {
    e = std::string("shutdown refused: ") + to_string(c.shutdown_error);
  } else if (!balanced()) {
    e = "unbalanced at close: " + std::to_string(c.balance.live_tickets) + " live ticket(s), " +
        std::to_string(c.balance.windows_free) + "/" + std::to_string(c.balance.windows) + " plan windows free, " +
        std::to_string(c.source_windows_free) + "/" + std::to_string(src->window_count()) + " source windows free";
  } else if (c.steps_consumed != lay.steps) {
    e = "only " + std::to_string(c.steps_consumed) + " of " + std::to_string(lay.steps) + " steps were consumed";
  }
  if (!e.empty() && c.counters.reconcile_violations > 0 && e.rfind("reconcile", 0) != 0)
    e += "; reconcile: " + plan->first_violation();
  return e;
}

namespace {

// Why a cell does not validate ("" when it does), per reference 004 Table 7.
std::string cell_failure(const StreamRun& r, const std::string& error) {
  const FaultCell cell = r.cfg.fault.cell;
  const StreamProducer& p = *r.producer;
  const StreamCellLog& f = p.cell;
  const bool fired = r.fault_report ? r.fault_report->fired : f.fired;
  if (!fired) return "the fault did not fire";
  if (fault_is_fatal(cell)) {
    const int64_t b = r.faulted_bundle();
    if (b >= 0 && p.bundle_states()[static_cast<size_t>(b)] == 2) return "the faulted bundle was published";
    if (p.fail_kind != expected_rejection(cell))
      return std::string("expected a ") + to_string(expected_rejection(cell)) + " rejection, got " +
             (p.fail_kind == PlanError::None ? std::string("none") : to_string(p.fail_kind));
    return {};
  }
  if (cell == FaultCell::Stall) return error.empty() ? "the storage stopped answering and the run did not fail" : "";
  if (cell == FaultCell::HeldConsumer && (f.held_refusal != PlanError::ConsumersLive || !r.shared->held_survived.load()))
    return std::string("reuse of the held version was not refused (") + to_string(f.held_refusal) + ")";
  if (cell == FaultCell::ShutdownLiveConsumer &&
      (f.shutdown_refusal != PlanError::ConsumersLive || !r.shared->held_survived.load()))
    return std::string("shutdown under a live consumer was not refused (") + to_string(f.shutdown_refusal) + ")";
  if (cell == FaultCell::ResetOutstanding && (f.reset_outstanding == 0 || r.close.counters.tickets_invalidated == 0))
    return "the reset found no outstanding source work";
  if (cell == FaultCell::OutOfOrder && r.fault_report->reordered < 2) return "fewer than two completions were reordered";
  return {};
}

const char* outcome(const StreamRun& r, bool fired, const std::string& error) {
  if (!fired) return "not-fired";
  if (fault_is_fatal(r.cfg.fault.cell)) return r.producer->failing ? "failed-closed" : "not-rejected";
  return error.empty() ? "recovered" : "failed";
}

nlohmann::json injected_at(const StreamRun& r) {
  const StreamShared& sh = *r.shared;
  if (r.cfg.fault.cell == FaultCell::HeldConsumer || r.cfg.fault.cell == FaultCell::ShutdownLiveConsumer)
    return {{"step", sh.held_step.load()}, {"object", r.object_name(r.lay.step_object[sh.held_step.load()])},
            {"slot", sh.held_slot.load()}, {"held_ns", sh.held_ns.load()}};
  const int64_t read = r.fault_report && r.fault_report->fired ? static_cast<int64_t>(r.fault_report->read) : r.producer->cell.read;
  if (read < 0 || static_cast<uint64_t>(read) >= r.lay.total_reads()) return nullptr;
  const uint64_t s = r.lay.step_of_read(static_cast<uint64_t>(read));
  const int w = r.fault_report ? r.fault_report->window : -1;
  return {{"read", read}, {"step", s}, {"object", r.object_name(r.lay.step_object[s])},
          {"window", w >= 0 ? nlohmann::json(w) : nlohmann::json(nullptr)}};
}

// Completions the Plan did not accept, by kind.
nlohmann::json refused_by_kind(const PlanCounters& pc) {
  nlohmann::json j = nlohmann::json::object();
  for (PlanError e : {PlanError::UnknownTicket, PlanError::StaleEpoch, PlanError::StaleGeneration, PlanError::WrongObject,
                      PlanError::WrongExtent, PlanError::WindowMismatch, PlanError::ShortRead, PlanError::ReadFailed,
                      PlanError::ExtentOutsideFile, PlanError::ExtentTooLarge, PlanError::SizeMismatch,
                      PlanError::BundleFailed})
    if (const uint64_t n = pc.errors[static_cast<size_t>(e)]) j[to_string(e)] = n;
  return j;
}

}  // namespace

nlohmann::json stream_fault_json(const StreamRun& r, std::string& error) {
  const FaultSpec& spec = r.cfg.fault;
  if (!spec.active()) return nullptr;
  const StreamProducer& p = *r.producer;
  const StreamClose& c = r.close;
  const bool fired = r.fault_report ? r.fault_report->fired : p.cell.fired;
  if (fault_is_fatal(spec.cell) && fired && error.empty()) error = "the fault was not rejected";
  std::string why = cell_failure(r, error);
  const bool pass = why.empty() && fired && r.balanced() && r.shared->mismatches.load() == 0 &&
                    c.counters.reconcile_violations == 0 && (fault_is_fatal(spec.cell) || spec.cell == FaultCell::Stall || error.empty());
  if (!why.empty() && error.empty()) error = why;
  if (!error.empty() && error.rfind("fault ", 0) != 0) error = "fault " + std::string(to_string(spec.cell)) + ": " + error;
  const int64_t fb = r.faulted_bundle();
  nlohmann::json j = fault_json(spec, r.fault_report.get());
  j["fired"] = fired;
  j["injected_at"] = injected_at(r);
  j["expected_rejection"] = or_null(expected_rejection(spec.cell));
  j["rejection"] = or_null(p.fail_kind);
  j["rejected"] = refused_by_kind(c.counters);
  j["published"] = {{"bundles", c.counters.bundles_published}, {"objects", c.counters.objects_published}};
  j["faulted_bundle"] = fb >= 0 ? nlohmann::json(fb) : nlohmann::json(nullptr);
  j["faulted_bundle_published"] = fb >= 0 && p.bundle_states()[static_cast<size_t>(fb)] == 2;
  j["reset_outstanding"] = p.cell.reset_outstanding;
  j["tickets_invalidated"] = c.counters.tickets_invalidated;
  j["tickets_abandoned"] = c.counters.tickets_abandoned;
  j["reuse_refusal"] = or_null(p.cell.held_refusal);
  j["shutdown_refusal"] = or_null(p.cell.shutdown_refusal);
  j["held_version_untouched"] = r.shared->held_survived.load();
  j["windows_free_at_close"] = c.source_windows_free;
  j["tickets_balanced"] = c.balance.tickets_balanced;
  j["balanced"] = r.balanced();
  j["outcome"] = outcome(r, fired, error);
  j["pass"] = pass;
  j["why"] = or_null(why);
  return j;
}

}  // namespace resid

namespace resid {

namespace {

nlohmann::json config_section(const StreamRun& r) {
  const StreamConfig& cfg = r.cfg;
  return {{"file", cfg.file},
          {"manifest", or_null(cfg.manifest)},
          {"object_bytes", cfg.object_bytes ? nlohmann::json(*cfg.object_bytes) : nlohmann::json(nullptr)},
          {"source", to_string(cfg.source)},
          {"windows", r.windows},
          {"depth", r.depth},
          {"window_bytes", cfg.window_bytes},
          {"register_buffers", cfg.register_buffers},
          {"slots", cfg.slots},
          {"consumers", cfg.consumers},
          {"passes", cfg.passes},
          {"bundle", cfg.bundle},
          {"eager_reconcile", cfg.eager_reconcile},
          {"fault", cfg.fault.active() ? nlohmann::json(to_string(cfg.fault)) : nlohmann::json(nullptr)},
          {"watchdog_s", cfg.watchdog_s},
          {"pattern_seed", cfg.pattern_seed ? nlohmann::json(*cfg.pattern_seed) : nlohmann::json(nullptr)}};
}

nlohmann::json manifest_section(const StreamRun& r) {
  const PlanManifest& m = r.m();
  return {{"input", r.cfg.object_bytes ? "object-bytes" : "objects.json"},
          {"objects", m.object_count()},
          {"extents", m.extents().size()},
          {"reads", m.pieces().size()},
          {"alignment", m.alignment()},
          {"logical_bytes", m.logical_bytes()},
          {"aligned_bytes", m.aligned_bytes()},
          {"padding_bytes", m.padding_bytes()},
          {"largest_object_aligned_bytes", m.largest_aligned_bytes()},
          {"steps_per_pass", r.order.size()},
          {"steps", r.lay.steps},
          {"bundles", r.lay.bundles},
          {"reads_planned", r.lay.total_reads()}};
}

nlohmann::json windows_section(const StreamRun& r) {
  return {{"count", r.src->window_count()},
          {"bytes_each", r.src->window_capacity()},
          {"total_bytes", r.src->window_bytes()},
          {"alignment", kHugeAlign},
          {"huge_page_advised", true},
          {"registered", r.src->registered_buffers()},
          {"free_at_close", r.close.source_windows_free},
          {"plan_free_at_close", r.close.balance.windows_free}};
}

// What the source and the Plan's windows did (the same section as the pager arms').
SourceReport source_report(const StreamRun& r) {
  const StreamClose& c = r.close;
  const LatencyHistogram& lat = r.producer->fill().read_latency();
  SourceReport s;
  s.engine = r.src->engine();
  s.windows = r.src->window_count();
  s.depth = r.depth;
  s.alignment = r.src->alignment();
  s.window_capacity = r.src->window_capacity();
  s.stats = c.source;
  s.read_count = lat.count();
  s.read_p50_ns = lat.quantile(0.5);
  s.read_p99_ns = lat.quantile(0.99);
  s.read_max_ns = lat.max();
  s.windows_free_at_close = c.source_windows_free;
  s.plan_windows_free_at_close = c.balance.windows_free;
  s.tickets_outstanding_at_close = c.balance.live_tickets;
  s.inflight_at_close = c.source_inflight;
  s.cancellations = c.counters.tickets_abandoned;
  s.alloc_counter_installed = alloc_hook_installed();
  s.dynamic_allocations = c.alloc1.read_path - c.alloc0.read_path;
  s.rejection_allocations = c.alloc1.rejection_path - c.alloc0.rejection_path;
  return s;
}

nlohmann::json plan_section(const StreamRun& r) {
  nlohmann::json j = plan_json(PlanRecord{*r.plan, r.close.shutdown_error, "objects.json or --object-bytes", r.cfg.consumers});
  if (j["first_rejection"].is_object()) j["first_rejection"]["text"] = r.rejection_text();
  return j;
}

nlohmann::json verify_section(const StreamRun& r) {
  const StreamShared& sh = *r.shared;
  const int64_t fm = sh.first_mismatch_step.load();
  return {{"checksum", "XXH64 per 64 KiB block seeded by file offset, summed per object"},
          {"reference", r.cfg.pattern_seed ? "pattern" : "file"},
          {"steps", r.lay.steps},
          {"steps_consumed", r.close.steps_consumed},
          {"objects_verified", sh.objects_verified.load()},
          {"bytes_verified", sh.bytes_verified.load()},
          {"mismatches", sh.mismatches.load()},
          {"first_mismatch_step", fm >= 0 ? nlohmann::json(fm) : nlohmann::json(nullptr)},
          {"digest", hex64(r.close.digest)}};
}

}  // namespace

nlohmann::json stream_record(const StreamRun& r, const std::string& error, const nlohmann::json& fault) {
  const StreamClose& c = r.close;
  const StreamProducer& p = *r.producer;
  nlohmann::json j;
  j["schema_version"] = kRunSchemaVersion;
  j["subcommand"] = "stream";
  j["status"] = error.empty() ? "ok" : "failed";
  j["error"] = or_null(error);
  j["source_engine"] = to_string(r.src->engine());
  j["config"] = config_section(r);
  j["file"] = {{"path", r.cfg.file}, {"bytes", r.src->file_size()}};
  j["manifest"] = manifest_section(r);
  j["windows"] = windows_section(r);
  j["slots"] = {{"count", r.cfg.slots}, {"bytes_each", r.slot_bytes}, {"arena_bytes", r.arena_bytes}};
  const SourceReport sr = source_report(r);
  j["source_stats"] = source_stats_json(&sr);
  j["plan"] = plan_section(r);
  j["verify"] = verify_section(r);
  j["allocations"] = {{"counter_installed", alloc_hook_installed()},
                      {"read_path_after_start", c.alloc1.read_path - c.alloc0.read_path},
                      {"rejection_path_after_start", c.alloc1.rejection_path - c.alloc0.rejection_path}};
  j["fault"] = fault;
  const FillCounters& fc = p.fill().counters();
  j["counters"] = {{"reads_issued", fc.reads_issued},
                   {"completions", fc.completions},
                   {"stale_epoch_completions", fc.invalidated},
                   {"dropped_completions", fc.dropped},
                   {"tickets_abandoned_at_close", p.abandoned}};
  j["reference_ns"] = c.reference_ns;
  j["wall_ns"] = c.wall_ns;
  const double secs = static_cast<double>(c.wall_ns) / 1e9, gib = static_cast<double>(1ull << 30);
  j["throughput_gib_s"] = secs > 0 ? static_cast<double>(c.counters.bytes_published) / gib / secs : 0.0;
  j["physical_throughput_gib_s"] = secs > 0 ? static_cast<double>(c.source.physical_bytes) / gib / secs : 0.0;
  return j;
}

}  // namespace resid
