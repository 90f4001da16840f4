#include "core/run_record.hpp"

#include "core/fsutil.hpp"

namespace resid {

void write_run_dir(const std::string& dir, const std::optional<std::string>& trace_bytes,
                   const nlohmann::json& run) {
  if (trace_bytes) write_file_atomic(dir + "/trace.bin", *trace_bytes);
  // Invalid UTF-8 (a prompt, a decoded piece) is replaced, never a reason to lose the record.
  write_file_atomic(dir + "/run.json", run.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace resid
