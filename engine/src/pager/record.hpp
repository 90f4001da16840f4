// The pager's Source and Plan in a run record (docs/run-contract.md, "Sources and the Plan in
// `generate`"), shared by `residctl generate` and `residctl scan`.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "pager/pager.hpp"

namespace resid {

// The head every pager run record starts with (schema, subcommand, status, error, arm,
// policy, source engine, uffd mode); null pager (arm A): policy, engine and mode null.
nlohmann::json pager_run_head(const char* subcommand, bool ok, const std::string& error, const char* arm,
                              std::optional<PolicyKind> policy, const Pager* p);

// `source_stats`: what the Source did (read after the pager shut down). Null pager (arm A):
// the same keys, engine null, zeros.
nlohmann::json pager_source_json(const Pager* p);
// `plan`: the Plan's lifecycle over the region's chunks (tickets, bundles, consumers,
// recycles, refusals, eager reconcile, shutdown); null for arm A.
nlohmann::json pager_plan_json(const Pager* p);
// `readahead`: F's bundles (zeros without read-ahead); null for arm A.
nlohmann::json pager_readahead_json(const Pager* p);
// `rejection`: the first fatal rejection of a read and its bundle (null when none).
nlohmann::json pager_rejection_json(const Pager* p);
// Why a run whose pager shut down is not cleanly closed ("" when it is): the Plan refused
// to shut down, a ticket is outstanding, a window is not FREE, or eager reconcile found a
// violation of the Plan's invariants.
std::string pager_close_error(const Pager& p);

}  // namespace resid
