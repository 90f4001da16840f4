// The GGUF metadata the llama adapter reads itself: read_gguf (the header and tensor table
// through ggml's gguf, then general.architecture, split.*, <arch>.expert_* and every
// tensor's name, type, offset, size and shape), then build_manifest over that table (the
// objects generate runs), with generate's checks after it (objects.json, the step chunks).
#include <cstddef>
#include <cstdint>

#include "adapters/llama/objects.hpp"
#include "gguf_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = resid::fuzz::as_file(data, size);
  resid::fuzz::expect_clean([&] {
    resid::GgufSummary g = resid::read_gguf(path);
    resid::fuzz::virtual_data(g);
    const resid::Manifest m = resid::build_manifest(g.tensors, g.file_bytes, g.data_offset, 65536, g.n_expert,
                                                    g.architecture + ".expert_count");
    (void)m.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // as generate writes it
    for (const auto& step : m.step_chunks())
      for (uint32_t c : step)
        if (c >= m.chunks) resid::fuzz::finding("manifest", "a step names a chunk past the file");
  });
  return 0;
}
