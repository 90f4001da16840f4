#include "pager/record.hpp"

#include "core/run_record.hpp"

namespace resid {

namespace {

nlohmann::json or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

}  // namespace

nlohmann::json pager_run_head(const char* subcommand, bool ok, const std::string& error, const char* arm,
                              std::optional<PolicyKind> policy, const Pager* p) {
  nlohmann::json j;
  j["schema_version"] = kRunSchemaVersion;
  j["subcommand"] = subcommand;
  j["status"] = ok ? "ok" : "failed";
  j["error"] = ok ? nlohmann::json(nullptr) : nlohmann::json(error);
  j["arm"] = arm;
  j["policy"] = policy ? nlohmann::json(to_string(*policy)) : nlohmann::json(nullptr);
  j["source_engine"] = p ? nlohmann::json(to_string(p->source().engine())) : nlohmann::json(nullptr);
  j["uffd_mode"] = p ? nlohmann::json(to_string(p->uffd_mode())) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json pager_source_json(const Pager* p) {
  const PagerSourceReport r = p ? p->source_report() : PagerSourceReport{};
  const SourceStats& s = r.stats;
  return {{"engine", p ? nlohmann::json(to_string(r.engine)) : nlohmann::json(nullptr)},
          {"windows", r.windows},
          {"depth", r.depth},
          {"alignment", r.alignment},
          {"window_bytes", r.window_capacity},
          {"submissions", s.reads},
          {"completions", s.completions},
          {"peak_depth", s.peak_inflight},
          {"logical_bytes", s.logical_bytes},
          {"physical_bytes", s.physical_bytes},
          {"padding_bytes", s.padding_bytes},
          {"rejections", s.rejections},
          {"cancellations", r.cancellations},
          {"read_p50_ns", r.read_p50_ns},
          {"read_p99_ns", r.read_p99_ns},
          {"read_max_ns", r.read_max_ns},
          {"windows_free_at_close", r.windows_free_at_close},
          {"plan_windows_free_at_close", r.plan_windows_free_at_close},
          {"tickets_outstanding_at_close", r.tickets_outstanding_at_close},
          {"dynamic_allocations", r.dynamic_allocations},
          {"allocation_counter_installed", r.alloc_counter_installed},
          {"rejection_path_allocations", r.rejection_allocations},
          // The earlier names, kept for readers of scan records.
          {"reads", s.reads},
          {"read_ns", s.read_ns}};
}

nlohmann::json pager_plan_json(const Pager* p) {
  if (!p) return nullptr;
  const Plan& plan = p->plan();
  const PlanCounters c = plan.counters();
  const PlanBalance bal = plan.balance();
  const RejectionRecord rej = plan.first_rejection();
  const auto shut = p->plan_shutdown();
  nlohmann::json refusals = nlohmann::json::object();
  for (size_t k = 1; k < c.errors.size(); ++k)
    if (c.errors[k]) refusals[to_string(static_cast<PlanError>(k))] = c.errors[k];
  nlohmann::json first_rej = nullptr;
  if (rej.kind != PlanError::None)
    first_rej = {{"kind", to_string(rej.kind)},
                 {"chunk", rej.slot >= 0 ? nlohmann::json(rej.slot) : nlohmann::json(nullptr)},
                 {"window", rej.window},
                 {"generation", rej.generation},
                 {"epoch", rej.epoch},
                 {"claimed_extent", {{"offset", rej.claimed_offset}, {"length", rej.claimed_length}}},
                 {"claimed_chunk", rej.claimed_object == UINT32_MAX ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(rej.claimed_object)}};
  return {{"objects", "one per chunk (its file extent)"},
          {"slots", plan.slot_count()},
          {"windows", plan.window_count()},
          {"epoch", plan.epoch()},
          {"transitions", c.transitions},
          {"requests", c.requests},
          {"bundles_published", c.bundles_published},
          {"objects_published", c.objects_published},
          {"bytes_published", c.bytes_published},
          {"bundles_failed", c.bundles_failed},
          {"tickets", {{"issued", c.tickets_issued}, {"retired", c.tickets_retired}, {"copied", c.tickets_copied},
                       {"rejected", c.tickets_rejected}, {"invalidated", c.tickets_invalidated},
                       {"abandoned", c.tickets_abandoned}, {"live", bal.live_tickets},
                       {"balanced", bal.tickets_balanced}}},
          {"completions_refused", c.completions_refused},
          {"consumers", {{"holds", c.consumer_acquires}, {"releases", c.consumer_releases},
                         {"balanced", bal.consumers_balanced}}},
          {"recycles", c.recycles},
          {"recycled_unconsumed", c.recycled_unconsumed},
          {"recycle_refusals", c.recycle_refusals},
          {"versions_discarded", c.versions_discarded},
          {"refusals", refusals},
          {"first_rejection", first_rej},
          {"reconcile_checks", c.reconcile_checks},
          {"reconcile_violations", c.reconcile_violations},
          {"first_violation", c.reconcile_violations ? or_null(plan.first_violation()) : nlohmann::json(nullptr)},
          {"shutdown", !shut ? nlohmann::json(nullptr)
                             : nlohmann::json(*shut == PlanError::None ? "ok" : to_string(*shut))},
          {"slots_vacant_at_close", bal.slots_vacant},
          {"windows_free_at_close", bal.windows_free},
          {"balanced", bal.balanced()}};
}

nlohmann::json pager_readahead_json(const Pager* p) {
  if (!p) return nullptr;
  const PagerStats s = p->stats();
  return {{"bundles", s.readahead_bundles},
          {"chunks", s.readahead_fills},
          {"waited_faults", s.readahead_waits},
          {"room_waits", s.readahead_no_room},
          {"bundles_published", s.bundles_published}};
}

nlohmann::json pager_rejection_json(const Pager* p) {
  if (!p) return nullptr;
  const PagerRejectionReport r = p->rejection_report();
  if (!r.any) return nullptr;
  return {{"kind", to_string(r.kind)},
          {"step", r.step},
          {"bundle", r.bundle},
          {"bundle_chunks_published", r.bundle_chunks_published}};
}

std::string pager_close_error(const Pager& p) {
  const Plan& plan = p.plan();
  const PlanCounters c = plan.counters();
  if (c.reconcile_violations > 0)
    return "plan reconcile: " + std::to_string(c.reconcile_violations) + " invariant violation(s); first: " +
           plan.first_violation();
  const auto shut = p.plan_shutdown();
  if (shut && *shut != PlanError::None) return std::string("plan: shutdown refused (") + to_string(*shut) + ")";
  const PagerSourceReport r = p.source_report();
  if (r.tickets_outstanding_at_close != 0 || r.plan_windows_free_at_close != r.windows ||
      r.windows_free_at_close != r.windows)
    return "unbalanced at close: " + std::to_string(r.tickets_outstanding_at_close) + " ticket(s) outstanding, " +
           std::to_string(r.plan_windows_free_at_close) + "/" + std::to_string(r.windows) + " Plan windows and " +
           std::to_string(r.windows_free_at_close) + "/" + std::to_string(r.windows) + " source windows free";
  return {};
}

}  // namespace resid
