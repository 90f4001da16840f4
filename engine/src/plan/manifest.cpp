#include "plan/manifest.hpp"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "core/errors.hpp"

namespace resid {

namespace {

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

PlanManifest PlanManifest::build(std::vector<PlanObjectSpec> specs, uint64_t file_size,
                                 uint32_t alignment, uint64_t max_read_bytes) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw InputError("manifest: alignment " + std::to_string(alignment) + " is not a power of two");
  if (max_read_bytes == 0 || max_read_bytes % alignment != 0)
    throw InputError("manifest: window capacity " + std::to_string(max_read_bytes) +
                     " is not a positive multiple of the alignment " + std::to_string(alignment));
  if (specs.empty()) throw InputError("manifest: no objects");
  PlanManifest m;
  m.file_size_ = file_size;
  m.alignment_ = alignment;
  m.max_read_bytes_ = max_read_bytes;
  std::set<std::string> names;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (uint32_t oi = 0; oi < specs.size(); ++oi) {
    PlanObjectSpec& s = specs[oi];
    if (s.name.empty()) throw InputError("manifest: object " + std::to_string(oi) + " has no name");
    if (!names.insert(s.name).second) throw InputError("manifest: duplicate object name '" + s.name + "'");
    if (s.extents.empty()) throw InputError("manifest: object '" + s.name + "' has no extents");
    PlanObject o;
    o.name = std::move(s.name);
    o.first_extent = static_cast<uint32_t>(m.extents_.size());
    o.first_piece = static_cast<uint32_t>(m.pieces_.size());
    uint64_t slot_pos = 0;
    for (const Extent& e : s.extents) {
      const std::string where = "manifest: object '" + o.name + "' extent [" +
                                std::to_string(e.offset) + ", +" + std::to_string(e.length) + ")";
      if (e.length == 0) throw InputError(where + " is empty");
      if (e.offset > file_size || e.length > file_size - e.offset)
        throw InputError(where + " overflows the file (" + std::to_string(file_size) + " bytes)");
      PlanExtent x;
      x.object = oi;
      x.offset = e.offset;
      x.length = e.length;
      slot_pos = round_up(slot_pos, kSlotExtentAlign);
      x.slot_offset = slot_pos;
      x.first_piece = static_cast<uint32_t>(m.pieces_.size());
      const uint64_t end = e.offset + e.length;
      const uint64_t astart = e.offset / alignment * alignment;
      const uint64_t aend = round_up(end, alignment);
      for (uint64_t p = astart; p < aend; p += max_read_bytes) {
        PlanPiece pc;
        pc.object = oi;
        pc.extent = static_cast<uint32_t>(m.extents_.size());
        pc.offset = std::max(e.offset, p);
        pc.length = std::min(end, p + max_read_bytes) - pc.offset;
        pc.aligned_offset = p;
        pc.aligned_length = std::min(aend, p + max_read_bytes) - p;
        pc.slot_offset = x.slot_offset + (pc.offset - e.offset);
        o.aligned_bytes += pc.aligned_length;
        m.pieces_.push_back(pc);
      }
      x.pieces = static_cast<uint32_t>(m.pieces_.size()) - x.first_piece;
      o.logical_bytes += e.length;
      slot_pos += e.length;
      m.extents_.push_back(x);
    }
    if (s.declared_bytes && *s.declared_bytes != o.logical_bytes)
      throw InputError("manifest: object '" + o.name + "' declares " + std::to_string(*s.declared_bytes) +
                       " bytes but its extents hold " + std::to_string(o.logical_bytes) +
                       " (object-size disagreement)");
    o.extents = static_cast<uint32_t>(m.extents_.size()) - o.first_extent;
    o.pieces = static_cast<uint32_t>(m.pieces_.size()) - o.first_piece;
    o.padding_bytes = o.aligned_bytes - o.logical_bytes;
    o.slot_bytes = slot_pos;
    m.logical_ += o.logical_bytes;
    m.aligned_ += o.aligned_bytes;
    m.largest_aligned_ = std::max(m.largest_aligned_, o.aligned_bytes);
    m.slot_bytes_needed_ = std::max(m.slot_bytes_needed_, std::max(o.aligned_bytes, o.slot_bytes));
    m.objects_.push_back(std::move(o));
  }
  m.slot_bytes_needed_ = round_up(m.slot_bytes_needed_, page);
  m.by_offset_.resize(m.pieces_.size());
  for (uint32_t i = 0; i < m.by_offset_.size(); ++i) m.by_offset_[i] = i;
  std::sort(m.by_offset_.begin(), m.by_offset_.end(), [&](uint32_t a, uint32_t b) {
    const PlanPiece &x = m.pieces_[a], &y = m.pieces_[b];
    return x.offset != y.offset ? x.offset < y.offset : x.length < y.length;
  });
  return m;
}

std::optional<uint32_t> PlanManifest::object_of_piece_range(const Extent& e) const {
  auto it = std::lower_bound(by_offset_.begin(), by_offset_.end(), e, [&](uint32_t i, const Extent& v) {
    const PlanPiece& p = pieces_[i];
    return p.offset != v.offset ? p.offset < v.offset : p.length < v.length;
  });
  if (it == by_offset_.end()) return std::nullopt;
  const PlanPiece& p = pieces_[*it];
  if (p.offset != e.offset || p.length != e.length) return std::nullopt;
  return p.object;
}

}  // namespace resid
