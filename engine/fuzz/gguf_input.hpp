// The GGUF targets' shared part: an input's bytes as a file read_gguf can open (a memfd, by
// its /proc/self/fd path: read_gguf and gguf_init_from_file read it as they would a model),
// and the tensor data section made virtual: the corpus holds headers and tensor tables only
// (the data cut off), so the summary's file size is raised to where the table's last tensor
// ends, up to 4 GiB (what a file of that size would give; build_manifest still checks every
// tensor against it).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "adapters/llama/adapter.hpp"
#include "fuzz_util.hpp"
#include "ggml.h"

namespace resid::fuzz {

inline std::string as_file(const uint8_t* data, size_t size) {
  // gguf logs every header it refuses (one line an input): silenced, the refusal is read_gguf's.
  static const bool quiet = (ggml_log_set([](ggml_log_level, const char*, void*) {}, nullptr), true);
  (void)quiet;
  static const int fd = ::memfd_create("fuzz.gguf", 0);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) finding("memfd", "cannot create or truncate");
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) finding("memfd", "cannot write");
    done += static_cast<size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

inline void virtual_data(GgufSummary& g) {
  uint64_t end = g.file_bytes;
  for (const auto& t : g.tensors) {
    if (t.offset > (uint64_t{1} << 32) || t.bytes > (uint64_t{1} << 32)) return;
    if (t.offset + t.bytes > end) end = t.offset + t.bytes;
  }
  g.file_bytes = end;
}

}  // namespace resid::fuzz
