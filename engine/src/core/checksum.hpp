// Checksums for `residctl stream`: every delivered byte is hashed by a consumer and the
// result compared with the same function over the file's extents.
//
// hash64(bytes, seed): XXH64 (libxxhash). Objects are hashed in blocks of kChecksumBlock bytes,
// counted from each extent's start; a block's seed is its file offset, and an object's
// checksum is the sum (mod 2^64) of its block hashes. The sum does not depend on which
// consumer hashed which block, and a block delivered at the wrong place changes it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace resid {

constexpr uint64_t kChecksumBlock = 64u << 10;

uint64_t hash64(const std::byte* p, size_t len, uint64_t seed);

// Folds an object checksum into a run digest (order-sensitive).
uint64_t digest_fold(uint64_t digest, uint64_t object_checksum);

}  // namespace resid
