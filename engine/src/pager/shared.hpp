// PagerShared: what the pager's components share (pager.hpp has the design).
//
// Contract. One record per pager, owned by the Pager, referenced by its components (the
// region, the evictor, the filler, the fault handler): the configuration, the books (the
// one owner of the per-chunk state), the pins, the Plan and its manifest, the Policy, the
// trace, the current step and the latest consumption signal, the counters (each component
// writes those of its concern) and the failure. Every field is guarded by `mu` unless its
// comment says otherwise; the lock order is `mu`, then the Plan's. A component keeps every
// other piece of its state itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/alloc_count.hpp"
#include "pager/books.hpp"
#include "pager/config.hpp"
#include "pager/pins.hpp"
#include "pager/trace.hpp"
#include "plan/manifest.hpp"
#include "plan/state.hpp"
#include "policy/policy.hpp"

namespace resid {

struct PagerShared {
  PagerShared(PagerConfig config, std::unique_ptr<Policy> pol, Trace* tr)
      : cfg(std::move(config)), policy(std::move(pol)), trace(tr) {}

  const PagerConfig cfg;
  const std::unique_ptr<Policy> policy;
  Trace* const trace;

  mutable std::mutex mu;
  ChunkBooks books;
  ThreadPins pins;  // the oversize steps' per-thread pins (pins.hpp)
  std::unique_ptr<PlanManifest> manifest;  // set once at construction
  std::unique_ptr<Plan> plan;              // set once at construction
  std::optional<PlanError> plan_shutdown;  // the Plan's answer at the pager's close
  uint64_t step = 0;
  uint64_t signal_next = 0;  // the step after the latest consumption signal (0: none yet)
  PagerStats st;

  // The failure: the first one wins; on_failure runs once, never under mu.
  std::string error;
  std::function<void()> on_failure;
  bool failure_callback_due = false;  // failed under mu: the fault loop calls on_failure
  std::atomic<bool> failed{false};
  bool fail_closed = false;  // a fatal rejection: no further read, copy or publication (pager thread)

  void fail(const std::string& why);
  // A failure's message is built on the rejection path (not counted as a read-path
  // allocation), and only once.
  template <class F>
  void fail_with(F&& make) {
    if (failed) return;
    RejectionPathScope scope;
    fail(make());
  }
  // The same with mu held: the failure callback runs later, from the fault loop.
  template <class F>
  void fail_locked_with(F&& make) {
    if (failed) return;
    RejectionPathScope scope;
    error = make();
    failed = true;
    failure_callback_due = true;
  }
  void run_due_failure_callback();
  // "resident=[...] budget_chunks=N consumers={...}" and the pins: a failure's evidence (under mu).
  std::string evidence_locked() const;
};

}  // namespace resid
