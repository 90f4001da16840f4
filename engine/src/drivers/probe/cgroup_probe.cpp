#include "drivers/probe/cgroup_probe.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "core/errors.hpp"
#include "core/fsutil.hpp"

namespace resid {

ProcCgroup parse_proc_cgroup(const std::string& text) {
  ProcCgroup out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':');
    if (a == std::string::npos) continue;
    const auto b = line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a);
    const std::string ctrls = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (id == "0" && ctrls.empty()) {
      out.v2_path = path;
      continue;
    }
    std::istringstream cs(ctrls);
    std::string c;
    while (std::getline(cs, c, ','))
      if (c == "memory") out.v1_memory_path = path;
  }
  return out;
}

namespace {

bool is_dir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string join(const std::string& root, const std::string& rel) {
  if (rel.empty() || rel == "/") return root;
  return root + (rel[0] == '/' ? "" : "/") + rel;
}

}  // namespace

CgroupInfo probe_cgroup() {
  CgroupInfo info;
  const auto text = read_text_file("/proc/self/cgroup");
  if (!text) {
    info.reason = "/proc/self/cgroup is unreadable";
    return info;
  }
  const ProcCgroup pc = parse_proc_cgroup(*text);
  // v2 counts only when the unified hierarchy is mounted at /sys/fs/cgroup and offers the
  // memory controller; a hybrid system's empty v2 tree cannot limit memory.
  const auto controllers = read_text_file("/sys/fs/cgroup/cgroup.controllers");
  bool v2_memory = false;
  if (controllers) {
    std::istringstream cs(*controllers);
    std::string c;
    while (cs >> c) v2_memory = v2_memory || c == "memory";
  }
  if (pc.v2_path && v2_memory) {
    info.version = 2;
    info.memory_path = join("/sys/fs/cgroup", *pc.v2_path);
  } else if (pc.v1_memory_path && is_dir("/sys/fs/cgroup/memory")) {
    info.version = 1;
    info.memory_path = join("/sys/fs/cgroup/memory", *pc.v1_memory_path);
  } else {
    info.reason = "no cgroup v2 memory controller and no v1 memory hierarchy found";
    return info;
  }
  const std::string child = info.memory_path + "/residctl-probe-" + std::to_string(::getpid());
  if (::mkdir(child.c_str(), 0755) != 0) {
    info.reason = "cannot create a child of " + info.memory_path + " (" + errno_name(errno) + ")";
    return info;
  }
  if (::rmdir(child.c_str()) != 0) {
    info.reason = "created " + child + " but cannot remove it (" + errno_name(errno) + ")";
    return info;
  }
  info.writable = true;
  info.reason = "created and removed a child cgroup in " + info.memory_path;
  return info;
}

}  // namespace resid
