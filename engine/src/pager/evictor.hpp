// Evictor: room within the budget (pager.hpp: the budget is exact).
//
// Contract. Every call is under the Pager's mutex, on the pager thread except try_recycle
// and set_mode. Room is counted as the books count it: resident chunks plus the chunks that
// reads in flight hold. A victim is the Policy's choice among chunks that are resident with
// no consumer and no pin (ChunkBooks::evictable); an eviction asks the Plan to recycle the
// chunk's slot first (the Plan refuses a slot with a live consumer or pin: then the pager
// has broken its own rule, and the run fails closed), then the region discards the pages
// (MADV_DONTNEED), then the books mark the chunk absent and the trace records it. Its own
// state: whether a chunk was evicted since the filler last asked (a coming step may need
// it read ahead again).
#pragma once

#include <cstdint>

#include "pager/region.hpp"
#include "pager/shared.hpp"

namespace resid {

class Evictor {
 public:
  Evictor(PagerShared& sh, Region& region) : sh_(sh), region_(region) {}

  // Room for one more chunk (a demand read of for_chunk, which is never a victim); with a
  // policy that evicts eagerly, everything evictable not read ahead goes first. False: no
  // victim (the fault waits for a leave) or the run failed.
  bool make_room_locked(ChunkId for_chunk);
  // Room for a landed read-ahead bundle of n chunks, all or nothing: victims not read ahead
  // first, then any. False: not enough victims now (what was evicted stays evicted).
  bool make_bundle_room_locked(uint32_t n);
  // Room for a prefetch of `candidate`: free room, or one victim whose next use is later
  // than the candidate's (prefetch never makes the next demand worse than no prefetch).
  bool make_prefetch_room_locked(ChunkId candidate);
  bool evict_locked(ChunkId c);
  // The negative control (Pager::try_recycle): the Plan decides alone; if it agrees the
  // chunk is evicted.
  PlanError try_recycle_locked(ChunkId c);
  // A step's mode: every pin is dropped, the Policy told.
  void set_mode_locked(bool oversize);
  // Whether a chunk was evicted since the last call.
  bool take_evicted_locked() {
    const bool e = evicted_;
    evicted_ = false;
    return e;
  }

 private:
  void mark_evicted_locked(ChunkId c);

  PagerShared& sh_;
  Region& region_;
  bool evicted_ = false;
};

}  // namespace resid
