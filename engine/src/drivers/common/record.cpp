#include "drivers/common/record.hpp"

namespace resid {

namespace {

nlohmann::json extent_json(const Extent& e) { return {{"offset", e.offset}, {"length", e.length}}; }

nlohmann::json first_rejection_json(const Plan& plan) {
  const RejectionRecord rej = plan.first_rejection();
  if (rej.kind == PlanError::None) return nullptr;
  const PlanManifest& m = plan.manifest();
  auto name = [&](uint32_t o) { return o < m.object_count() ? nlohmann::json(m.object(o).name) : nlohmann::json(nullptr); };
  return {{"kind", to_string(rej.kind)},
          {"object", name(rej.object)},
          {"piece", rej.piece},
          {"slot", rej.slot >= 0 ? nlohmann::json(rej.slot) : nlohmann::json(nullptr)},
          {"window", rej.window},
          {"generation", rej.generation},
          {"epoch", rej.epoch},
          {"claimed_extent", {{"offset", rej.claimed_offset}, {"length", rej.claimed_length}}},
          {"claimed_object", rej.claimed_object == UINT32_MAX ? nlohmann::json(nullptr) : name(rej.claimed_object)}};
}

nlohmann::json refusals_json(const PlanCounters& c) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t k = 1; k < c.errors.size(); ++k)
    if (c.errors[k]) j[to_string(static_cast<PlanError>(k))] = c.errors[k];
  return j;
}

}  // namespace

nlohmann::json or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }
nlohmann::json or_null(PlanError e) { return e == PlanError::None ? nlohmann::json(nullptr) : nlohmann::json(to_string(e)); }

nlohmann::json source_stats_json(const SourceReport* p) {
  const SourceReport r = p ? *p : SourceReport{};
  const SourceStats& s = r.stats;
  return {{"engine", p ? nlohmann::json(to_string(r.engine)) : nlohmann::json(nullptr)},
          {"windows", r.windows},
          {"depth", r.depth},
          {"page_cache_readahead", p && r.engine == SourceEngine::Buffered ? nlohmann::json("off: POSIX_FADV_RANDOM")
                                                                          : nlohmann::json(nullptr)},
          {"alignment", r.alignment},
          {"window_bytes", r.window_capacity},
          {"submissions", s.reads},
          {"completions", s.completions},
          {"peak_depth", s.peak_inflight},
          {"logical_bytes", s.logical_bytes},
          {"physical_bytes", s.physical_bytes},
          {"padding_bytes", s.padding_bytes},
          {"rejections", s.rejections},
          {"read_ns", s.read_ns},  // inside the read syscalls (uring: the sum of submit -> reap)
          {"cancellations", r.cancellations},
          {"read_p50_ns", r.read_p50_ns},
          {"read_p99_ns", r.read_p99_ns},
          {"read_max_ns", r.read_max_ns},
          {"windows_free_at_close", r.windows_free_at_close},
          {"plan_windows_free_at_close", r.plan_windows_free_at_close},
          {"tickets_outstanding_at_close", r.tickets_outstanding_at_close},
          {"inflight_at_close", r.inflight_at_close},
          {"dynamic_allocations", r.dynamic_allocations},
          {"allocation_counter_installed", r.alloc_counter_installed},
          {"rejection_path_allocations", r.rejection_allocations}};
}

nlohmann::json plan_json(const PlanRecord& r) {
  const Plan& plan = r.plan;
  const PlanCounters c = plan.counters();
  const PlanBalance bal = plan.balance();
  nlohmann::json shut = nullptr;
  if (r.shutdown) shut = *r.shutdown == PlanError::None ? "ok" : to_string(*r.shutdown);
  return {{"objects", r.objects},
          {"slots", plan.slot_count()},
          {"windows", plan.window_count()},
          {"epoch", plan.epoch()},
          {"transitions", c.transitions},
          {"requests", c.requests},
          {"bundles_published", c.bundles_published},
          {"objects_published", c.objects_published},
          {"bytes_published", c.bytes_published},
          {"bundles_failed", c.bundles_failed},
          {"bundles_invalidated", c.bundles_invalidated},
          {"tickets", {{"issued", c.tickets_issued}, {"retired", c.tickets_retired}, {"copied", c.tickets_copied},
                       {"rejected", c.tickets_rejected}, {"invalidated", c.tickets_invalidated},
                       {"abandoned", c.tickets_abandoned}, {"live", bal.live_tickets},
                       {"balanced", bal.tickets_balanced}}},
          {"completions_refused", c.completions_refused},
          {"consumers", {{"declared", r.declared_consumers ? nlohmann::json(*r.declared_consumers) : nlohmann::json(nullptr)},
                         {"acquires", c.consumer_acquires},
                         {"releases", c.consumer_releases},
                         {"balanced", bal.consumers_balanced}}},
          {"recycles", c.recycles},
          {"recycled_unconsumed", c.recycled_unconsumed},
          {"recycle_refusals", c.recycle_refusals},
          {"shutdown_refusals", c.shutdown_refusals},
          {"resets", c.resets},
          {"versions_discarded", c.versions_discarded},
          {"refusals", refusals_json(c)},
          {"first_rejection", first_rejection_json(plan)},
          {"reconcile_checks", c.reconcile_checks},
          {"reconcile_violations", c.reconcile_violations},
          {"first_violation", c.reconcile_violations ? or_null(plan.first_violation()) : nlohmann::json(nullptr)},
          {"shutdown", shut},
          {"slots_vacant_at_close", bal.slots_vacant},
          {"windows_free_at_close", bal.windows_free},
          {"balanced", bal.balanced()}};
}

nlohmann::json fault_json(const FaultSpec& spec, const FaultReport* r) {
  if (!spec.active()) return nullptr;
  nlohmann::json j = {{"cell", to_string(spec.cell)}, {"at", spec.at}, {"class", fault_class(spec.cell)},
                      {"fired", r ? r->fired : false}};
  if (!r) return j;
  const bool f = r->fired;
  j["read"] = f ? nlohmann::json(r->read) : nlohmann::json(nullptr);
  j["window"] = f && r->window >= 0 ? nlohmann::json(r->window) : nlohmann::json(nullptr);
  j["tag"] = f ? nlohmann::json(r->tag) : nlohmann::json(nullptr);
  j["presented_tag"] = f ? nlohmann::json(r->presented_tag) : nlohmann::json(nullptr);
  j["extent"] = f ? extent_json(r->extent) : nlohmann::json(nullptr);
  j["delivered"] = f ? extent_json(r->delivered) : nlohmann::json(nullptr);
  j["reordered"] = r->reordered;
  j["withheld"] = r->withheld;
  return j;
}

}  // namespace resid
