// The synthetic region file: written by `mkregion`, checked before `scan` maps it.
#pragma once

#include <cstdint>
#include <string>

namespace resid {

// Write `bytes` (a positive multiple of 4096) of the pattern to `path` via a temporary
// name and rename. Throws InputError for bad arguments, RunError for I/O failures.
void make_region(const std::string& path, uint64_t bytes, uint64_t seed);

// Size of an existing region file; InputError if it is missing, empty, not a regular
// file, or not a multiple of 4096 bytes.
uint64_t region_size(const std::string& path);

}  // namespace resid
