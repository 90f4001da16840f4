// Eager reconcile (the books against the kernel and the Plan: ChunkBooks::reconcile); the
// evidence line a failure carries.
#include <sstream>

#include "pager/pager_internal.hpp"

namespace resid {

std::string Pager::first_mismatch() const {
  std::lock_guard lk(mu_);
  return books_.first_mismatch();
}

uint64_t Pager::reconcile_now() {
  std::lock_guard lk(mu_);
  const uint64_t before = st_.reconcile_mismatches;
  reconcile_locked();
  return st_.reconcile_mismatches - before;
}

std::string Pager::evidence_locked() const {
  std::ostringstream os;
  os << books_.evidence(cfg_.budget_chunks) << pins_.evidence();
  return os.str();
}

void Pager::reconcile_locked() {
  ++st_.reconcile_checks;
  // Not against the Plan once the run failed (a failed bundle's slots are vacated before its
  // chunks leave the books), nor after the Plan's shutdown (every slot is VACANT then).
  const Plan* plan = failed_ || plan_shutdown_ ? nullptr : plan_.get();
  st_.reconcile_mismatches += books_.reconcile(base_, page_, plan, &st_.max_present_pages);
}

}  // namespace resid
