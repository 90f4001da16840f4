// --fault CELL[@N]: parse_fault_spec (source/fault.hpp) on any text. A spec that parses
// prints back as CELL@N and parses again to the same spec.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "source/fault.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  resid::fuzz::expect_clean([&] {
    const resid::FaultSpec s = resid::parse_fault_spec(text);
    const resid::FaultSpec t = resid::parse_fault_spec(resid::to_string(s));
    if (t.cell != s.cell || t.at != s.at) resid::fuzz::finding("round trip", resid::to_string(s).c_str());
  });
  return 0;
}
