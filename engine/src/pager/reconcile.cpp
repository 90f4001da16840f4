// Eager reconcile: the pager's books against the kernel (mincore) and the Plan; the
// evidence line a failure carries.
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "pager/pager_internal.hpp"

namespace resid {

std::string Pager::first_mismatch() const {
  std::lock_guard lk(mu_);
  return first_mismatch_;
}

uint64_t Pager::reconcile_now() {
  std::lock_guard lk(mu_);
  const uint64_t before = st_.reconcile_mismatches;
  reconcile_locked();
  return st_.reconcile_mismatches - before;
}

std::string Pager::evidence_locked() const {
  std::ostringstream os;
  os << "resident=[";
  auto rs = resident_list_;
  std::sort(rs.begin(), rs.end());
  for (size_t i = 0; i < rs.size(); ++i) os << (i ? "," : "") << rs[i];
  os << "] budget_chunks=" << cfg_.budget_chunks << " consumers={";
  bool first = true;
  for (ChunkId c = 0; c < chunks_; ++c)
    if (consumers_[c] > 0) {
      os << (first ? "" : ",") << c << ":" << consumers_[c];
      first = false;
    }
  os << "}";
  if (oversize_) {
    os << " oversize pins={";
    for (size_t i = 0; i < thread_pins_.size(); ++i)
      os << (i ? "," : "") << "tid " << thread_pins_[i].first << ":" << thread_pins_[i].second;
    os << "}";
  }
  return os.str();
}

void Pager::reconcile_locked() {
  // Kernel residency per mapped run of pages, then per chunk: a resident chunk must have
  // every mapped page present, an absent one none.
  const uint64_t total = registered_bytes_ / page_;
  std::vector<uint8_t>& known = mincore_known_;
  known.assign(total, 0);
  for (uint64_t p = 0; p < total;) {
    if (page_unmapped_[p]) {
      ++p;
      continue;
    }
    uint64_t q = p;
    while (q < total && !page_unmapped_[q]) ++q;
    if (::mincore(base_ + p * page_, (q - p) * page_, mincore_buf_.data() + p) == 0)
      std::fill(known.begin() + static_cast<ptrdiff_t>(p), known.begin() + static_cast<ptrdiff_t>(q), 1);
    // ENOMEM: being unmapped right now (event not read yet); those chunks are skipped.
    p = q;
  }
  ++st_.reconcile_checks;
  uint64_t present_total = 0;
  for (ChunkId c = 0; c < chunks_; ++c) {
    if (mapped_pages_[c] == 0) continue;
    const uint64_t p0 = first_page(c), np = pages_in(c);
    uint64_t present = 0, mapped = 0;
    bool skip = false;
    for (uint64_t p = p0; p < p0 + np; ++p) {
      if (page_unmapped_[p]) continue;
      if (!known[p]) {
        skip = true;
        break;
      }
      ++mapped;
      present += mincore_buf_[p] & 1;
    }
    if (skip || state_[c] == State::Filling) continue;  // mid-publish: neither answer is wrong
    present_total += present;
    const bool ok = state_[c] == State::Resident ? present == mapped : present == 0;
    if (!ok) {
      ++st_.reconcile_mismatches;
      RejectionPathScope scope;
      if (first_mismatch_.empty())
        first_mismatch_ = "chunk " + std::to_string(c) + " is " +
                          (state_[c] == State::Resident ? "resident" : "absent") +
                          " in the books but the kernel has " + std::to_string(present) + "/" +
                          std::to_string(mapped) + " pages present";
    }
  }
  st_.max_present_pages = std::max(st_.max_present_pages, present_total);

  // The books against the Plan: a chunk's state is its slot's phase (Absent: VACANT,
  // Filling: LOADING, Resident: published), and its consumers and pins are the slot's live
  // consumers (a resident chunk with one is IN_USE). Not once the run failed (a failed
  // bundle's slots are vacated before its chunks leave the books).
  if (failed_ || plan_shutdown_) return;  // after the Plan's shutdown every slot is VACANT
  plan_->slot_states(plan_phase_.data(), plan_consumers_.data());
  for (ChunkId c = 0; c < chunks_; ++c) {
    const SlotPhase ph = plan_phase_[c];
    const uint32_t held = static_cast<uint32_t>(consumers_[c]) + pins_[c];
    bool ok;
    switch (state_[c]) {
      // A reset forgot its read in flight: LOADING (abandoned) until that completion retires.
      case State::Absent: ok = ph == SlotPhase::Vacant || (stale_[c] && ph == SlotPhase::Loading); break;
      case State::Filling: ok = ph == SlotPhase::Loading; break;
      case State::Resident:
        ok = held > 0 ? ph == SlotPhase::InUse : (ph == SlotPhase::DeviceReady || ph == SlotPhase::Recyclable);
        break;
      default: ok = false;
    }
    ok = ok && held == plan_consumers_[c];
    if (ok) continue;
    ++st_.reconcile_mismatches;
    if (first_mismatch_.empty()) {
      RejectionPathScope scope;
      first_mismatch_ = "chunk " + std::to_string(c) + " is " +
                        (state_[c] == State::Resident ? "resident" : state_[c] == State::Filling ? "filling" : "absent") +
                        " with " + std::to_string(held) + " consumer(s)/pin(s) in the books but its Plan slot is " +
                        to_string(ph) + " with " + std::to_string(plan_consumers_[c]) + " consumer(s)";
    }
  }
}

}  // namespace resid
