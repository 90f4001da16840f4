// Shared vocabulary types of every layer (docs/design.md): an extent of the canonical model
// file, and a chunk of the pager region.
#pragma once

#include <cstdint>

namespace resid {

// (offset, length) of bytes in the canonical file.
struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// A fixed-size aligned unit of the pager region, numbered from the region's start.
using ChunkId = uint32_t;

}  // namespace resid
