// Writing a run directory per the contract: every file goes to a temporary name and is
// renamed into place, run.json after the others and manifest.json last (every file of the
// directory with its size and sha256), so a directory with a manifest.json is complete and
// any later change to one of its files is detectable.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace resid {

constexpr int kRunSchemaVersion = 1;
constexpr int kManifestSchemaVersion = 1;

void write_run_dir(const std::string& dir, const std::optional<std::string>& trace_bytes,
                   const nlohmann::json& run);

// manifest.json: {"schema_version", "files": [{"name", "bytes", "sha256"}, ...]} over every
// regular file of `dir` but itself and temporaries (*.tmp), sorted by name.
void write_manifest(const std::string& dir);

}  // namespace resid
