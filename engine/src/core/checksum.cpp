#include "core/checksum.hpp"

#include <xxhash.h>

#include <cstring>

namespace resid {

uint64_t hash64(const std::byte* p, size_t len, uint64_t seed) { return XXH64(p, len, seed); }

uint64_t digest_fold(uint64_t digest, uint64_t object_checksum) {
  // Order-sensitive: the running digest seeds the hash of the next object's checksum.
  unsigned char b[8];
  std::memcpy(b, &object_checksum, sizeof b);
  return XXH64(b, sizeof b, digest);
}

}  // namespace resid
