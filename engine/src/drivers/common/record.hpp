// The run-record sections that every subcommand writing a Source or a Plan shares
// (docs/run-contract.md): one writer per section, so a key means the same in every run.json.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "plan/fill.hpp"
#include "plan/state.hpp"
#include "source/fault.hpp"

namespace resid {

nlohmann::json or_null(const std::string& s);
nlohmann::json or_null(PlanError e);
template <class T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// `source_stats`: what the source and the Plan's windows did. Null report (arm A): the same
// keys, engine null, zeros.
nlohmann::json source_stats_json(const SourceReport* r);

// `plan`: the Plan's lifecycle (bundles, tickets, consumers, recycles, refusals, the first
// rejection, eager reconcile, shutdown, balance).
struct PlanRecord {
  const Plan& plan;
  std::optional<PlanError> shutdown;        // nullopt: not shut down
  std::string objects;                      // what an object is here
  std::optional<uint32_t> declared_consumers;  // nullopt: open consumers (the pager)
};
nlohmann::json plan_json(const PlanRecord& r);

// `fault`: null without --fault; else the cell, its point, its class and, for a source cell,
// what the decorator did (`report` null for a driver cell: the driver adds what it saw).
nlohmann::json fault_json(const FaultSpec& spec, const FaultReport* report);

}  // namespace resid
