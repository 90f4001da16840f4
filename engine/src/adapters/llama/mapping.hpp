// Interposing on llama.cpp's mapping of the model file, without a patch to llama.cpp.
//
// The engine links with -Wl,--wrap=mmap,--wrap=munmap, so every call to mmap/munmap from a
// statically linked object (libllama.a's llama-mmap.o among them) lands in __wrap_mmap /
// __wrap_munmap below, which pass through to the real calls unless armed:
//
//   observe     (arm A)       a mapping of the model file goes to the kernel as asked; its
//                             address, length and later munmaps are recorded.
//   substitute  (pager arms)  a read-only mapping of the model file at offset 0 is answered
//                             with the pager's region of stable addresses (MAP_POPULATE is
//                             not honoured: populating would read the whole model past the
//                             budget). munmap of fragments inside the region (llama.cpp trims
//                             the GGUF header and unused tails) goes to the real munmap; the
//                             pager sees UFFD_EVENT_UNMAP and drops those pages (never COPYs
//                             into them again). Any other mapping of the model file is
//                             refused (EPERM, recorded): there is no silent fallback to the
//                             kernel's mapping.
//   teardown    (after the pager shut down, before llama_model_free)  munmaps inside the
//                             region are recorded and left to the pager's destructor, which
//                             owns the region (so nothing is unmapped twice and the pager
//                             never sees an address range vanish under it). In observe mode
//                             they go to the kernel.
//
// The pager thread must be running while substitute mode is armed: the kernel holds a munmap
// of a registered range until the userfaultfd reader has read its UNMAP event.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace resid {

struct MappingReport {
  std::string mode = "off";        // off | observe | substitute (as armed last)
  bool interposed = false;         // substitute: the model file's mapping is the pager region
  uint64_t mmap_calls = 0;         // mmap calls for the model file
  uint64_t munmap_calls = 0;       // munmap calls that touched the model mapping
  uint64_t populate_ignored = 0;   // MAP_POPULATE asked of the substituted mapping
  std::string requested_flags;     // the flags llama.cpp asked for, e.g. "MAP_SHARED|MAP_POPULATE"
  uintptr_t addr = 0;              // where the model mapping lives
  uint64_t length = 0;             // the length llama.cpp asked for (the file size)
  // File-offset ranges [first, last) unmapped while the model was live (forwarded to munmap).
  std::vector<std::pair<uint64_t, uint64_t>> unmapped_fragments;
  uint64_t teardown_unmaps = 0;    // munmaps after teardown() (model free)
  std::string refused;             // why a model-file mapping was refused (empty: none)
};

namespace model_mapping {

void observe(dev_t dev, ino_t ino);
// region: the pager's base; file_bytes: the model file's size; region_bytes: how much of the
// region may be unmapped by the application (the pager's registered, page-rounded length).
void substitute(dev_t dev, ino_t ino, void* region, uint64_t file_bytes, uint64_t region_bytes);
void teardown();
void disarm();  // pass everything through again; the report is kept until the next arm
MappingReport report();
nlohmann::json to_json(const MappingReport& r);

}  // namespace model_mapping
}  // namespace resid
