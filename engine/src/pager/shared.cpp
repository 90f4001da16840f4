// The failure every component reports through, and a failure's evidence.
#include "pager/shared.hpp"

namespace resid {

void PagerShared::fail(const std::string& why) {
  RejectionPathScope scope;
  std::function<void()> cb;
  {
    std::lock_guard lk(mu);
    if (failed) return;
    error = why;
    failed = true;
    failure_callback_due = false;
    cb = on_failure;
  }
  if (cb) cb();
}

void PagerShared::run_due_failure_callback() {
  std::function<void()> cb;
  {
    std::lock_guard lk(mu);
    if (!failure_callback_due) return;
    failure_callback_due = false;
    cb = on_failure;
  }
  RejectionPathScope scope;
  if (cb) cb();
}

std::string PagerShared::evidence_locked() const { return books.evidence(cfg.budget_chunks) + pins.evidence(); }

}  // namespace resid
