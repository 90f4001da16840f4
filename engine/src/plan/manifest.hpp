// The Plan's immutable half: the manifest (reference 004 §3.1; docs/design.md). Objects are
// named by model semantics (a layer, an expert) and map to one or more source extents of
// the canonical file. The manifest records, per object, its logical bytes, the aligned
// physical bytes a direct read of it moves, the padding between the two, and where each
// extent lands in a slot. An extent larger than a window is served by several reads
// ("pieces"), split at aligned boundaries so every piece's aligned span fits one window.
// The mutable half (windows, slots, tickets, epochs) is plan_state.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "source/source.hpp"

namespace resid {

// Where extents start inside a slot: every extent begins on this boundary.
constexpr uint64_t kSlotExtentAlign = 64;

struct PlanObjectSpec {
  std::string name;
  std::vector<Extent> extents;
  std::optional<uint64_t> declared_bytes;  // if given, must equal the sum of extent lengths
};

struct PlanPiece {  // one source read
  uint32_t object = 0;
  uint32_t extent = 0;              // global extent index
  uint64_t offset = 0;              // logical file range of this read
  uint64_t length = 0;
  uint64_t aligned_offset = 0;      // the aligned span a direct read moves
  uint64_t aligned_length = 0;
  uint64_t slot_offset = 0;         // where the logical bytes land in the slot
  Extent extent_range() const { return {offset, length}; }
};

struct PlanExtent {
  uint32_t object = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t slot_offset = 0;
  uint32_t first_piece = 0;
  uint32_t pieces = 0;
};

struct PlanObject {
  std::string name;
  uint32_t first_extent = 0;
  uint32_t extents = 0;
  uint32_t first_piece = 0;
  uint32_t pieces = 0;
  uint64_t logical_bytes = 0;  // sum of extent lengths
  uint64_t aligned_bytes = 0;  // sum of the pieces' aligned spans
  uint64_t padding_bytes = 0;  // aligned - logical
  uint64_t slot_bytes = 0;     // bytes the object occupies in a slot (extents at 64-byte starts)
};

class PlanManifest {
 public:
  // Throws InputError (bad input, exit 2) for: no objects, an object without extents, an
  // empty or duplicate name, an empty extent, an extent past the end of the file, a
  // declared size that disagrees with the extents. `alignment` is the source's request
  // alignment (1 for buffered), `max_read_bytes` the window capacity (a multiple of it).
  static PlanManifest build(std::vector<PlanObjectSpec> objects, uint64_t file_size,
                            uint32_t alignment, uint64_t max_read_bytes);

  std::span<const PlanObject> objects() const { return objects_; }
  std::span<const PlanExtent> extents() const { return extents_; }
  std::span<const PlanPiece> pieces() const { return pieces_; }
  const PlanObject& object(uint32_t i) const { return objects_[i]; }
  const PlanPiece& piece(uint32_t i) const { return pieces_[i]; }
  uint32_t object_count() const { return static_cast<uint32_t>(objects_.size()); }

  uint64_t file_size() const { return file_size_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t max_read_bytes() const { return max_read_bytes_; }
  uint64_t logical_bytes() const { return logical_; }
  uint64_t aligned_bytes() const { return aligned_; }
  uint64_t padding_bytes() const { return aligned_ - logical_; }
  // Largest object's aligned bytes, and the slot size that holds any object (page rounded).
  uint64_t largest_aligned_bytes() const { return largest_aligned_; }
  uint64_t slot_bytes_needed() const { return slot_bytes_needed_; }

  // The object owning a piece whose logical range is exactly `e`, if any (a completion
  // carrying another object's bytes is told apart from a garbled extent this way).
  std::optional<uint32_t> object_of_piece_range(const Extent& e) const;

 private:
  std::vector<PlanObject> objects_;
  std::vector<PlanExtent> extents_;
  std::vector<PlanPiece> pieces_;
  std::vector<uint32_t> by_offset_;  // piece indexes sorted by (offset, length)
  uint64_t file_size_ = 0;
  uint32_t alignment_ = 1;
  uint64_t max_read_bytes_ = 0;
  uint64_t logical_ = 0;
  uint64_t aligned_ = 0;
  uint64_t largest_aligned_ = 0;
  uint64_t slot_bytes_needed_ = 0;
};

}  // namespace resid
