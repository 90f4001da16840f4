// Which memory cgroup this process is in, which hierarchy version provides it, and whether
// a child can be created there (what the harness needs to enforce a hard host limit).
#pragma once

#include <optional>
#include <string>

namespace resid {

struct CgroupInfo {
  std::optional<int> version;  // 1, 2, or none found
  std::string memory_path;     // directory of this process's memory cgroup
  bool writable = false;
  std::string reason;          // why not writable / not found, or what was checked
};

CgroupInfo probe_cgroup();

// Parse /proc/self/cgroup text: the v2 path (line "0::PATH") and the v1 memory path
// (a line whose controller list contains "memory"). Exposed for tests.
struct ProcCgroup {
  std::optional<std::string> v2_path;
  std::optional<std::string> v1_memory_path;
};
ProcCgroup parse_proc_cgroup(const std::string& text);

}  // namespace resid
