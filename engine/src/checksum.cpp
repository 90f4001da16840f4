#include "checksum.hpp"

#include <cstring>

#include "pattern.hpp"

namespace resid {

namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t load64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian host (x86_64, aarch64): the file's byte order
}

inline uint64_t round(uint64_t acc, uint64_t w) { return rotl(acc + w * kP2, 31) * kP1; }

inline uint64_t merge(uint64_t h, uint64_t acc) { return (h ^ round(0, acc)) * kP1 + kP4; }

}  // namespace

uint64_t hash64(const std::byte* p, size_t len, uint64_t seed) {
  const std::byte* const end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t a = seed + kP1 + kP2, b = seed + kP2, c = seed, d = seed - kP1;
    const std::byte* const limit = end - 32;
    do {
      a = round(a, load64(p));
      b = round(b, load64(p + 8));
      c = round(c, load64(p + 16));
      d = round(d, load64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18);
    h = merge(h, a);
    h = merge(h, b);
    h = merge(h, c);
    h = merge(h, d);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(len);
  while (p + 8 <= end) {
    h ^= round(0, load64(p));
    h = rotl(h, 27) * kP1 + kP4;
    p += 8;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(static_cast<uint8_t>(*p)) * kP5;
    h = rotl(h, 11) * kP1;
    ++p;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t digest_fold(uint64_t digest, uint64_t object_checksum) {
  return splitmix64(digest ^ object_checksum) + kP3;
}

}  // namespace resid
