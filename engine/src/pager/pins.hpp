// ThreadPins: the oversize steps' per-thread pins (pager.hpp, "Oversize steps").
//
// Contract. The state is whether the current step runs oversize and, per compute thread
// (the faulting thread's id), the last kPerThread distinct chunks it faulted on, as
// (tid, chunk) pairs oldest first, for at most max_threads threads (0: no limit). Every pin
// is one of its chunk's pins in the books (ChunkRecord::pins) and one hold of its Plan slot:
// pin(), clear() and set_oversize() keep the three in step, and nothing else changes a
// pin. Under the Pager's mutex; reserve() sizes it once, so pin() never allocates.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pager/books.hpp"
#include "plan/state.hpp"

namespace resid {

class ThreadPins {
 public:
  static constexpr uint32_t kPerThread = 2;

  void reserve(uint32_t max_threads);
  bool oversize() const { return oversize_; }
  // A step change: every pin is dropped, then the new step's mode holds.
  void set_oversize(bool oversize, ChunkBooks& books, Plan& plan);
  void clear(ChunkBooks& books, Plan& plan);
  // Thread tid faulted on chunk c: c becomes its newest pin, its oldest beyond kPerThread
  // goes (++pin_moves); a thread beyond max_threads displaces the least recently faulting
  // thread's pins. max_pins: the most pins held at once.
  void pin(uint32_t tid, ChunkId c, uint32_t max_threads, ChunkBooks& books, Plan& plan, uint64_t& pin_moves,
           uint64_t& max_pins);
  // " oversize pins={tid T:c,...}" in an oversize step, else empty: a failure's evidence.
  std::string evidence() const;

 private:
  bool oversize_ = false;
  std::vector<std::pair<uint32_t, ChunkId>> pins_;  // (tid, chunk), oldest first
};

}  // namespace resid
