// Writing a run directory per the contract: every file goes to a temporary name and is
// renamed into place, run.json last, so a directory with a run.json is complete.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace resid {

constexpr int kRunSchemaVersion = 1;

void write_run_dir(const std::string& dir, const std::optional<std::string>& trace_bytes,
                   const nlohmann::json& run);

}  // namespace resid
