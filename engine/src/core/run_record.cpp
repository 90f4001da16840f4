#include "core/run_record.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/fsutil.hpp"
#include "core/sha256.hpp"

namespace resid {

void write_run_dir(const std::string& dir, const std::optional<std::string>& trace_bytes,
                   const nlohmann::json& run) {
  if (trace_bytes) write_file_atomic(dir + "/trace.bin", *trace_bytes);
  // Invalid UTF-8 (a prompt, a decoded piece) is replaced, never a reason to lose the record.
  write_file_atomic(dir + "/run.json", run.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  write_manifest(dir);
}

void write_manifest(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (!e.is_regular_file() || n == "manifest.json" || (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0)) continue;
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  nlohmann::json files = nlohmann::json::array();
  for (const auto& n : names) {
    uint64_t bytes = 0;
    const std::string sha = sha256_file(dir + "/" + n, &bytes);
    files.push_back({{"name", n}, {"bytes", bytes}, {"sha256", sha}});
  }
  const nlohmann::json m = {{"schema_version", kManifestSchemaVersion}, {"files", files}};
  write_file_atomic(dir + "/manifest.json", m.dump(2) + "\n");
}

}  // namespace resid
