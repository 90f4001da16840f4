// ChunkBooks: the region's bookkeeping, the one owner of the pager's per-chunk state.
//
// Contract. One ChunkRecord per chunk (its state, consumers, pins, fill history, mapped
// pages), the resident set, the room that reads in flight hold, and the region's hole map
// (the pages the application unmapped). Nothing else in the pager keeps a per-chunk copy of
// these. Every access is under the Pager's mutex, except that the pager thread, the only
// writer of `state`, `mapped_pages`, the hole map and the resident set, may read those
// without it. The books never talk to the kernel or the Plan except in reconcile(), the
// eager check (PagerConfig::eager_reconcile) that they agree with both: the kernel's
// residency (mincore) and the Plan's slots (the Plan keeps its own slot state for its own
// invariants; a disagreement is counted as a mismatch, never repaired). Sized once by
// init(): nothing here allocates on the read path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plan/state.hpp"
#include "policy/policy.hpp"

namespace resid {

enum class ChunkState : uint8_t { Absent, Filling, Resident };

struct ChunkRecord {
  ChunkState state = ChunkState::Absent;
  uint8_t prefetched_unused = 0;  // filled ahead (prefetch, read-ahead), not entered since
  uint8_t poisoned = 0;           // its read was rejected: never read again (the run failed)
  uint8_t stale = 0;              // a reset forgot its read in flight: reuse once its Plan slot is VACANT
  uint16_t pins = 0;              // threads pinning it (oversize steps)
  int32_t consumers = 0;          // live consumers (enter/leave)
  uint32_t mapped_pages = 0;      // its pages the application has not unmapped
  int64_t last_demand_step = -1;  // the step of its latest demand fill
  uint64_t fills = 0;             // fills published
};

class ChunkBooks {
 public:
  // `pages`: the registered (page-rounded) file size in pages; chunk c's pages are
  // [c * chunk_pages, c * chunk_pages + pages_in(c)).
  void init(uint32_t chunks, uint64_t chunk_pages, uint64_t pages);

  uint32_t chunks() const { return static_cast<uint32_t>(chunks_.size()); }
  ChunkRecord& operator[](ChunkId c) { return chunks_[c]; }
  const ChunkRecord& operator[](ChunkId c) const { return chunks_[c]; }
  const ChunkRecord& at(ChunkId c) const { return chunks_.at(c); }
  uint64_t first_page(ChunkId c) const { return c * chunk_pages_; }
  uint64_t pages_in(ChunkId c) const;

  // Resident, without a consumer or a pin: the policy may choose it as a victim.
  bool evictable(ChunkId c) const {
    const ChunkRecord& r = chunks_[c];
    return r.consumers == 0 && r.pins == 0 && r.state == ChunkState::Resident;
  }
  // Consumers and pins together: the Plan's live consumers of the chunk's slot.
  uint32_t held(ChunkId c) const { return static_cast<uint32_t>(chunks_[c].consumers) + chunks_[c].pins; }

  // The resident set (unordered; the policy's candidates).
  const std::vector<ChunkId>& resident() const { return resident_; }
  void add_resident(ChunkId c);
  void remove_resident(ChunkId c);
  // Room: chunks of demand and prefetch reads in flight (and read-ahead bundles being
  // published) count against the budget with the resident ones.
  uint32_t filling() const { return filling_; }
  void take_room(uint32_t n) { filling_ += n; }
  void return_room(uint32_t n) { filling_ -= n; }
  uint64_t occupied() const { return resident_.size() + filling_; }

  // The hole map: per page, unmapped by the application (UFFD_EVENT_UNMAP).
  const std::vector<uint8_t>& holes() const { return unmapped_; }
  bool page_unmapped(uint64_t p) const { return unmapped_[p] != 0; }
  // Marks page p unmapped (it was mapped); true when its chunk has no mapped page left.
  bool unmap_page(uint64_t p);

  // "resident=[...] budget_chunks=N consumers={c:n,...}": a failure's evidence (the pins
  // are the evictor's to add).
  std::string evidence(uint64_t budget_chunks) const;

  // The eager check: the books against the kernel (mincore over `base`'s mapped runs) and
  // against the Plan's slots (skipped when `plan` is null: after a failure or the Plan's
  // shutdown). Returns the mismatching chunks found; the first one's description is kept.
  // *max_present_pages: the most pages mincore saw present at one check.
  uint64_t reconcile(const std::byte* base, uint64_t page, const Plan* plan, uint64_t* max_present_pages);
  const std::string& first_mismatch() const { return first_mismatch_; }

 private:
  std::vector<ChunkRecord> chunks_;
  std::vector<ChunkId> resident_;
  uint32_t filling_ = 0;
  std::vector<uint8_t> unmapped_;
  uint64_t chunk_pages_ = 0;
  // reconcile's scratch, sized once
  std::vector<unsigned char> mincore_buf_;
  std::vector<uint8_t> mincore_known_;
  std::vector<SlotPhase> plan_phase_;
  std::vector<uint32_t> plan_consumers_;
  std::string first_mismatch_;
};

}  // namespace resid
