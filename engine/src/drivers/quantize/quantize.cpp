#include "drivers/quantize/quantize.hpp"

#include <cstdio>
#include <map>

#include "core/errors.hpp"

#if RESID_WITH_LLAMA
#include "llama.h"
#endif

namespace resid {

#if !RESID_WITH_LLAMA

int run_quantize(const std::string&, const std::string&, const std::string&, bool, int) {
  throw InputError("this residctl was built without llama.cpp: `quantize` is unavailable");
}

#else

namespace {

const std::map<std::string, llama_ftype>& ftypes() {
  static const std::map<std::string, llama_ftype> m = {
      {"f16", LLAMA_FTYPE_MOSTLY_F16},       {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
      {"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},     {"q4_k_s", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M},
      {"iq4_nl", LLAMA_FTYPE_MOSTLY_IQ4_NL}};
  return m;
}

}  // namespace

int run_quantize(const std::string& in, const std::string& out, const std::string& type, bool pure, int threads) {
  const auto it = ftypes().find(type);
  if (it == ftypes().end()) {
    std::string names;
    for (const auto& [k, v] : ftypes()) names += (names.empty() ? "" : ", ") + k;
    throw InputError("--type " + type + " is not one of " + names);
  }
  // llama.cpp's log is not the contract's stderr: kept quiet (the status says if it failed).
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_quantize_params p = llama_model_quantize_default_params();
  p.ftype = it->second;
  p.pure = pure;
  p.nthread = threads;
  p.allow_requantize = true;  // a synthetic model may already be Q8_0
  const std::string tmp = out + ".tmp";
  const uint32_t rc = llama_model_quantize(in.c_str(), tmp.c_str(), &p);
  llama_backend_free();
  if (rc != 0) {
    std::remove(tmp.c_str());
    throw InputError("llama.cpp could not quantize " + in + " to " + type + " (status " + std::to_string(rc) + ")");
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) throw RunError("cannot rename " + tmp + " to " + out);
  return 0;
}

#endif

}  // namespace resid
