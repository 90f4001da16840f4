// `residctl stream`'s verification: an object's checksum is the sum of the XXH64 of its
// 64 KiB blocks, each seeded by its file offset (core/checksum.hpp). The reference comes from
// an independent path (a buffered read of the file, or the mkregion pattern); consumers
// hash what the slots hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plan/manifest.hpp"

namespace resid {

// Object checksums read with plain buffered pread before the timed stream; the file's pages
// are dropped afterwards (a buffered arm must start cold). Only objects with needed[o].
std::vector<uint64_t> file_checksums(const std::string& path, const PlanManifest& m, const std::vector<bool>& needed);
// The same from the `mkregion` pattern of `seed`, without reading the file.
std::vector<uint64_t> pattern_checksums(const PlanManifest& m, const std::vector<bool>& needed, uint64_t seed);
// The blocks of `object` consumer `me` of `n` hashes, read from its slot.
uint64_t consumer_partial(const PlanManifest& m, uint32_t object, const std::byte* slot, uint32_t me, uint32_t n);

}  // namespace resid
