#include "core/proc_io.hpp"

#include <cstdio>
#include <cstring>

namespace resid {

std::optional<uint64_t> proc_read_bytes() {
  FILE* f = std::fopen("/proc/self/io", "re");
  if (!f) return std::nullopt;
  char line[256];
  std::optional<uint64_t> out;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long v = 0;
    if (std::sscanf(line, "read_bytes: %llu", &v) == 1) {
      out = v;
      break;
    }
  }
  std::fclose(f);
  return out;
}

}  // namespace resid
