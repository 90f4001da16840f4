// The oversize steps' per-thread pins (pins.hpp).
#include "pager/pins.hpp"

#include <algorithm>
#include <cstddef>
#include <sstream>

namespace resid {

void ThreadPins::reserve(uint32_t max_threads) {
  pins_.reserve(kPerThread * (max_threads ? max_threads : 16) + kPerThread);
}

void ThreadPins::set_oversize(bool oversize, ChunkBooks& books, Plan& plan) {
  clear(books, plan);
  oversize_ = oversize;
}

std::string ThreadPins::evidence() const {
  if (!oversize_) return {};
  std::ostringstream os;
  os << " oversize pins={";
  for (size_t i = 0; i < pins_.size(); ++i) os << (i ? "," : "") << "tid " << pins_[i].first << ":" << pins_[i].second;
  os << "}";
  return os.str();
}

void ThreadPins::clear(ChunkBooks& books, Plan& plan) {
  for (const auto& [tid, c] : pins_) {
    --books[c].pins;
    plan.unhold(static_cast<int32_t>(c));
  }
  pins_.clear();
}

void ThreadPins::pin(uint32_t tid, ChunkId c, uint32_t max_threads, ChunkBooks& books, Plan& plan, uint64_t& pin_moves,
                     uint64_t& max_pins) {
  // A thread's pins: the last kPerThread distinct chunks it faulted on (it is blocked on
  // the newest, so it reads nothing else now). Two, because a thread can need two chunks at
  // once: a matrix-product tile reads several rows block by block, interleaved (llamafile's
  // tinyBLAS Q8_0 kernel: 4 rows per tile, 32 weights of each row in turn), and a tile whose
  // rows straddle a chunk boundary alternates between the two chunks; with one pin the
  // chunks evict each other on every block. pins_ is ordered oldest first.
  size_t mine = 0, oldest_mine = SIZE_MAX;
  for (size_t i = 0; i < pins_.size(); ++i) {
    if (pins_[i].first != tid) continue;
    if (pins_[i].second == c) {  // already pinned by this thread: now its newest
      auto e = pins_[i];
      pins_.erase(pins_.begin() + static_cast<ptrdiff_t>(i));
      pins_.push_back(e);
      return;
    }
    if (mine++ == 0) oldest_mine = i;
  }
  if (mine >= kPerThread) {
    --books[pins_[oldest_mine].second].pins;
    plan.unhold(static_cast<int32_t>(pins_[oldest_mine].second));
    pins_.erase(pins_.begin() + static_cast<ptrdiff_t>(oldest_mine));
    ++pin_moves;
  } else if (mine == 0 && max_threads > 0) {
    // A new thread beyond --threads (unexpected): the least recently faulting thread's pins go.
    // (Counted in place: the fault path does not allocate.)
    auto first_of = [&](size_t i) {
      for (size_t k = 0; k < i; ++k)
        if (pins_[k].first == pins_[i].first) return false;
      return true;
    };
    size_t threads = 0;
    for (size_t i = 0; i < pins_.size(); ++i) threads += first_of(i);
    if (threads >= max_threads) {
      // The least recent thread is the one whose newest pin is oldest.
      uint32_t victim = pins_.front().first;
      size_t victim_newest = SIZE_MAX;
      for (size_t j = 0; j < pins_.size(); ++j) {
        if (!first_of(j)) continue;
        const uint32_t t = pins_[j].first;
        size_t newest = 0;
        for (size_t i = 0; i < pins_.size(); ++i)
          if (pins_[i].first == t) newest = i;
        if (newest < victim_newest) {
          victim_newest = newest;
          victim = t;
        }
      }
      for (size_t i = pins_.size(); i-- > 0;)
        if (pins_[i].first == victim) {
          --books[pins_[i].second].pins;
          plan.unhold(static_cast<int32_t>(pins_[i].second));
          pins_.erase(pins_.begin() + static_cast<ptrdiff_t>(i));
        }
    }
  }
  pins_.emplace_back(tid, c);
  ++books[c].pins;
  plan.hold(static_cast<int32_t>(c));
  max_pins = std::max<uint64_t>(max_pins, pins_.size());
}

}  // namespace resid
