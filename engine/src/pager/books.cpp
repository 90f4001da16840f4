// The region's bookkeeping (books.hpp), and the eager check of the books against the
// kernel (mincore) and the Plan.
#include "pager/books.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <sstream>

#include "core/alloc_count.hpp"

namespace resid {

void ChunkBooks::init(uint32_t chunks, uint64_t chunk_pages, uint64_t pages) {
  chunk_pages_ = chunk_pages;
  chunks_.assign(chunks, ChunkRecord{});
  unmapped_.assign(pages, 0);
  for (ChunkId c = 0; c < chunks; ++c) chunks_[c].mapped_pages = static_cast<uint32_t>(pages_in(c));
  resident_.reserve(chunks);
  filling_ = 0;
  mincore_buf_.assign(pages, 0);
  mincore_known_.reserve(pages);
  plan_phase_.resize(chunks);
  plan_consumers_.resize(chunks);
}

uint64_t ChunkBooks::pages_in(ChunkId c) const {
  return std::min(chunk_pages_, static_cast<uint64_t>(unmapped_.size()) - first_page(c));
}

void ChunkBooks::add_resident(ChunkId c) {
  chunks_[c].state = ChunkState::Resident;
  resident_.push_back(c);
}

void ChunkBooks::remove_resident(ChunkId c) {
  auto it = std::find(resident_.begin(), resident_.end(), c);
  if (it != resident_.end()) {
    *it = resident_.back();
    resident_.pop_back();
  }
}

bool ChunkBooks::unmap_page(uint64_t p) {
  unmapped_[p] = 1;
  return --chunks_[static_cast<ChunkId>(p / chunk_pages_)].mapped_pages == 0;
}

std::string ChunkBooks::evidence(uint64_t budget_chunks) const {
  std::ostringstream os;
  os << "resident=[";
  auto rs = resident_;
  std::sort(rs.begin(), rs.end());
  for (size_t i = 0; i < rs.size(); ++i) os << (i ? "," : "") << rs[i];
  os << "] budget_chunks=" << budget_chunks << " consumers={";
  bool first = true;
  for (ChunkId c = 0; c < chunks(); ++c)
    if (chunks_[c].consumers > 0) {
      os << (first ? "" : ",") << c << ":" << chunks_[c].consumers;
      first = false;
    }
  os << "}";
  return os.str();
}

uint64_t ChunkBooks::reconcile(const std::byte* base, uint64_t page, const Plan* plan, uint64_t* max_present_pages) {
  // Kernel residency per mapped run of pages, then per chunk: a resident chunk must have
  // every mapped page present, an absent one none.
  const uint64_t total = unmapped_.size();
  std::vector<uint8_t>& known = mincore_known_;
  known.assign(total, 0);
  for (uint64_t p = 0; p < total;) {
    if (unmapped_[p]) {
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < total && !unmapped_[q]) ++q;
    if (::mincore(const_cast<std::byte*>(base) + p * page, (q - p) * page, mincore_buf_.data() + p) == 0)
      std::fill(known.begin() + static_cast<ptrdiff_t>(p), known.begin() + static_cast<ptrdiff_t>(q), 1);
    // ENOMEM: being unmapped right now (event not read yet); those chunks are skipped.
    p = q;
  }
  uint64_t mismatches = 0;
  uint64_t present_total = 0;
  for (ChunkId c = 0; c < chunks(); ++c) {
    const ChunkRecord& r = chunks_[c];
    if (r.mapped_pages == 0) continue;
    const uint64_t p0 = first_page(c), np = pages_in(c);
    uint64_t present = 0, mapped = 0;
    bool skip = false;
    for (uint64_t p = p0; p < p0 + np; ++p) {
      if (unmapped_[p]) continue;
      if (!known[p]) {
        skip = true;
        break;
      }
      ++mapped;
      present += mincore_buf_[p] & 1;
    }
    if (skip || r.state == ChunkState::Filling) continue;  // mid-publish: neither answer is wrong
    present_total += present;
    const bool ok = r.state == ChunkState::Resident ? present == mapped : present == 0;
    if (!ok) {
      ++mismatches;
      RejectionPathScope scope;
      if (first_mismatch_.empty())
        first_mismatch_ = "chunk " + std::to_string(c) + " is " +
                          (r.state == ChunkState::Resident ? "resident" : "absent") +
                          " in the books but the kernel has " + std::to_string(present) + "/" +
                          std::to_string(mapped) + " pages present";
    }
  }
  *max_present_pages = std::max(*max_present_pages, present_total);

  // The books against the Plan: a chunk's state is its slot's phase (Absent: VACANT,
  // Filling: LOADING, Resident: published), and its consumers and pins are the slot's live
  // consumers (a resident chunk with one is IN_USE).
  if (!plan) return mismatches;
  plan->slot_states(plan_phase_.data(), plan_consumers_.data());
  for (ChunkId c = 0; c < chunks(); ++c) {
    const ChunkRecord& r = chunks_[c];
    const SlotPhase ph = plan_phase_[c];
    const uint32_t h = held(c);
    bool ok;
    switch (r.state) {
      // A reset forgot its read in flight: LOADING (abandoned) until that completion retires.
      case ChunkState::Absent: ok = ph == SlotPhase::Vacant || (r.stale && ph == SlotPhase::Loading); break;
      case ChunkState::Filling: ok = ph == SlotPhase::Loading; break;
      case ChunkState::Resident:
        ok = h > 0 ? ph == SlotPhase::InUse : (ph == SlotPhase::DeviceReady || ph == SlotPhase::Recyclable);
        break;
      default: ok = false;
    }
    ok = ok && h == plan_consumers_[c];
    if (ok) continue;
    ++mismatches;
    if (first_mismatch_.empty()) {
      RejectionPathScope scope;
      first_mismatch_ = "chunk " + std::to_string(c) + " is " +
                        (r.state == ChunkState::Resident ? "resident" : r.state == ChunkState::Filling ? "filling" : "absent") +
                        " with " + std::to_string(h) + " consumer(s)/pin(s) in the books but its Plan slot is " +
                        to_string(ph) + " with " + std::to_string(plan_consumers_[c]) + " consumer(s)";
    }
  }
  return mismatches;
}

}  // namespace resid
