// `residctl quantize`: rewrite a GGUF with its tensors quantized to one llama.cpp file type,
// by the pinned llama.cpp's own quantizer (llama_model_quantize), so every quantized model
// the pipeline makes (the architecture matrix's repacked types, a speculative draft) is made
// by the runtime that reads it.
#pragma once

#include <string>

namespace resid {

// `type`: q4_0, q4_1, q8_0, q4_k_s, q4_k_m, iq4_nl, f16. `pure`: every tensor to that type
// (no mixed K-quant recipe). InputError for an unknown type or a file llama.cpp cannot
// quantize (the message quotes llama.cpp's); the output is written to a temporary name and
// renamed. Returns the exit status. Without llama.cpp: InputError saying so.
int run_quantize(const std::string& in, const std::string& out, const std::string& type, bool pure, int threads);

}  // namespace resid
