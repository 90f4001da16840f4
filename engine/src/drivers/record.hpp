// The run-record sections that several subcommands write (docs/run-contract.md): one writer
// per section, so a key means the same in every run.json.
#pragma once

#include <nlohmann/json.hpp>

#include "source/fault.hpp"

namespace resid {

// `fault`: null without --fault; else the cell, its point, its class and, for a source cell,
// what the decorator did (`report` null for a driver cell: the driver adds what it saw).
nlohmann::json fault_json(const FaultSpec& spec, const FaultReport* report);

}  // namespace resid
