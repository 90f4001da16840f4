// Eager reconcile (the books against the kernel and the Plan: ChunkBooks::reconcile); the
// evidence line a failure carries.
#include <sstream>

#include "pager/pager.hpp"
#include "pager/pager_internal.hpp"

namespace resid {

std::string Pager::first_mismatch() const {
  std::lock_guard lk(sh_.mu);
  return sh_.books.first_mismatch();
}

uint64_t Pager::reconcile_now() {
  std::lock_guard lk(sh_.mu);
  const uint64_t before = sh_.st.reconcile_mismatches;
  region_->reconcile_locked();
  return sh_.st.reconcile_mismatches - before;
}

}  // namespace resid
