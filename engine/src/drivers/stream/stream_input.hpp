// `residctl stream` input: the objects to stream and their declared order, from a JSON
// manifest or by tiling the file with fixed-size objects (docs/run-contract.md, `stream`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/manifest.hpp"

namespace resid {

struct StreamObjects {
  std::vector<PlanObjectSpec> objects;
  std::vector<std::string> order;  // declared step order of one pass (object names); empty = list order
};

// Accepted shapes (InputError, exit 2, for anything else):
//   {"objects": [{"name": S, "extents": [{"offset": N, "length": N}, ...], "bytes": N?}, ...],
//    "step_order": [S, ...]?, "file_bytes": N?}
//   a bare list of such objects;
//   the llama adapter's objects.json: objects with "tensors": [{"offset": N, "bytes": N, ...}]
//   (used in preference to its "extents", which are [offset, length] pairs, also accepted).
// "bytes", when present, must equal the sum of the extents (object-size disagreement is bad
// input); "file_bytes", when present, must equal the size of the file being streamed.
StreamObjects load_objects_json(const std::string& path, uint64_t file_size);

// The parse behind load_objects_json, on the manifest's text (no I/O; `path` only names it in
// messages). Contract: returns the objects and order of one of the shapes above, or throws
// InputError naming what is wrong; no other exception, whatever the text.
StreamObjects parse_objects_json(std::string_view text, const std::string& path, uint64_t file_size);

// Objects "obj.0", "obj.1", ... of `object_bytes` each tiling [0, file_size); the last one
// holds the remainder.
StreamObjects tile_objects(uint64_t file_size, uint64_t object_bytes);

}  // namespace resid
