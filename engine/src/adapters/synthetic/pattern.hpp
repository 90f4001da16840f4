// The synthetic region pattern from docs/run-contract.md: the little-endian u64 at byte
// offset o (a multiple of 8) is splitmix64(o ^ (seed * golden)). Every byte is derivable
// from its offset, so any read can be verified without a second copy of the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace resid {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

constexpr uint64_t splitmix64(uint64_t z) {
  z += kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr uint64_t pattern_word(uint64_t offset, uint64_t seed) {
  return splitmix64(offset ^ (seed * kGolden));
}

// Fill `len` bytes (a multiple of 8) that belong at file offset `offset` (a multiple of 8).
void fill_pattern(std::byte* dst, uint64_t offset, size_t len, uint64_t seed);

struct VerifyMismatch {
  uint64_t offset;    // file offset of the first wrong byte
  uint8_t expected;
  uint8_t actual;
};

struct VerifyResult {
  uint64_t bad_words = 0;               // 8-byte words that differ from the pattern
  std::optional<VerifyMismatch> first;  // the first wrong byte
};

// Check `len` bytes (multiple of 8) read from file offset `offset`. Loads are 8-byte
// aligned words (the caller passes page-aligned memory), each really performed.
VerifyResult verify_pattern(const std::byte* src, uint64_t offset, size_t len, uint64_t seed);

}  // namespace resid
