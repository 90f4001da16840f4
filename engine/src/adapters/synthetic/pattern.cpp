#include "adapters/synthetic/pattern.hpp"

#include <cstring>

namespace resid {

void fill_pattern(std::byte* dst, uint64_t offset, size_t len, uint64_t seed) {
  for (size_t i = 0; i + 8 <= len; i += 8) {
    const uint64_t w = pattern_word(offset + i, seed);
    std::memcpy(dst + i, &w, 8);  // host is little-endian (x86_64/aarch64), as the contract
  }
}

VerifyResult verify_pattern(const std::byte* src, uint64_t offset, size_t len, uint64_t seed) {
  VerifyResult r;
  const auto* words = reinterpret_cast<const volatile uint64_t*>(src);
  for (size_t i = 0; i < len / 8; ++i) {
    const uint64_t want = pattern_word(offset + i * 8, seed);
    const uint64_t got = words[i];  // volatile: the load must really touch the page
    if (got == want) continue;
    ++r.bad_words;
    if (!r.first) {
      const uint64_t diff = got ^ want;
      const unsigned byte = static_cast<unsigned>(__builtin_ctzll(diff)) / 8;
      r.first = VerifyMismatch{offset + i * 8 + byte, static_cast<uint8_t>(want >> (8 * byte)),
                               static_cast<uint8_t>(got >> (8 * byte))};
    }
  }
  return r;
}

}  // namespace resid
