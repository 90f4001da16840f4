// `residctl stream --manifest`: parse_objects_json (drivers/stream/stream_input.hpp) on any text,
// then what stream does with a parse that succeeds: the step order checked against the
// objects, and the Plan's manifest built (PlanManifest::build: InputError for objects that
// do not fit the file). The file's size is the document's "file_bytes" when it is at most
// 1 GiB, else 1 MiB; direct-read alignment 4096 and 1 MiB windows, generate's defaults.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "drivers/stream/stream_input.hpp"
#include "fuzz_util.hpp"
#include "plan/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  uint64_t file = 1 << 20;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("file_bytes") && j["file_bytes"].is_number_unsigned()) {
    const uint64_t f = j["file_bytes"].get<uint64_t>();
    if (f > 0 && f <= (uint64_t{1} << 30)) file = f;
  }
  resid::fuzz::expect_clean([&] {
    resid::StreamObjects in = resid::parse_objects_json(text, "fuzz.json", file);
    std::map<std::string, uint32_t> index;
    for (uint32_t i = 0; i < in.objects.size(); ++i) index[in.objects[i].name] = i;
    for (const auto& n : in.order)
      if (!index.count(n)) return;  // stream's InputError: an unknown object in the order
    const auto m = resid::PlanManifest::build(std::move(in.objects), file, 4096, 1 << 20);
    if (m.object_count() != index.size()) resid::fuzz::finding("manifest", "objects lost or duplicated");
  });
  return 0;
}
