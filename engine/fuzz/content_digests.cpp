// --content-digests: parse_chunk_digests (drivers/common/content_digests.hpp) on any text. The run's
// chunk size and file size are the document's own when they are what a run could have (a
// positive multiple of 4096, at most 2^20 chunks), so mutations reach past the size check;
// else those of the corpus's files. A parse that succeeds must give one digest per chunk.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "drivers/common/content_digests.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  uint64_t chunk = 65536, bytes = 704736;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("chunk_size") && j["chunk_size"].is_number_unsigned() && j.contains("bytes") &&
      j["bytes"].is_number_unsigned()) {
    const uint64_t c = j["chunk_size"].get<uint64_t>(), b = j["bytes"].get<uint64_t>();
    if (c > 0 && c % 4096 == 0 && c <= (uint64_t{1} << 40) && b / c < (uint64_t{1} << 20)) chunk = c, bytes = b;
  }
  resid::fuzz::expect_clean([&] {
    const auto d = resid::parse_chunk_digests(text, "fuzz.json", bytes, chunk);
    if (d.size() != (bytes + chunk - 1) / chunk) resid::fuzz::finding("digest count", "not one per chunk");
  });
  return 0;
}
