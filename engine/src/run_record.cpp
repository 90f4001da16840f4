#include "run_record.hpp"

#include "fsutil.hpp"

namespace resid {

void write_run_dir(const std::string& dir, const std::optional<std::string>& trace_bytes,
                   const nlohmann::json& run) {
  if (trace_bytes) write_file_atomic(dir + "/trace.bin", *trace_bytes);
  write_file_atomic(dir + "/run.json", run.dump(2) + "\n");
}

}  // namespace resid
