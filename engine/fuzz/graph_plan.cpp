// --graph-plan: EvalObserver::load_plans_text (adapters/llama/adapter.hpp) on any text, for
// one real model (the gguf corpus's tiny dense model, read with read_gguf as generate does),
// with the tensor signals off and on (--consumption object and tensor). A plan that loads
// must write back (plans_json) as a plan that loads again.
#include <cstddef>
#include <cstdint>

#include "adapters/llama/objects.hpp"
#include "gguf_input.hpp"

namespace {

struct NoListener : resid::StepListener {
  void pass_started(std::optional<std::vector<uint32_t>>) override {}
  void object_entered(uint32_t) override {}
  void routes(int, std::vector<std::vector<int32_t>>) override {}
};

const resid::Manifest& model() {
  static const resid::Manifest m = [] {
    resid::GgufSummary g = resid::read_gguf(RESID_FUZZ_MODEL);
    resid::fuzz::virtual_data(g);
    return resid::build_manifest(g.tensors, g.file_bytes, g.data_offset, 65536, g.n_expert,
                                 g.architecture + ".expert_count");
  }();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static NoListener listener;
  for (const bool signals : {false, true}) {
    resid::EvalObserver o(model(), listener);
    o.set_tensor_signals(signals);
    bool loaded = false;
    resid::fuzz::expect_clean([&] {
      o.load_plans_text(text, "fuzz.json");
      loaded = true;
    });
    if (!loaded) continue;
    resid::EvalObserver again(model(), listener);
    again.set_tensor_signals(signals);
    const std::string back = o.plans_json().dump();
    try {
      again.load_plans_text(back, "plans_json");
    } catch (const std::exception& e) {
      resid::fuzz::finding("a loaded plan does not load again", e.what());
    }
  }
  return 0;
}
