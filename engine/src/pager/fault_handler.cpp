// The fault handler's life (fault_handler.hpp): set-up, start, shutdown, notifications and
// what it reports; the loop itself is in fault_loop.cpp.
#include "pager/fault_handler.hpp"

#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <string>

#include "core/errors.hpp"

namespace resid {

FaultHandler::FaultHandler(PagerShared& sh, Region& region, Evictor& evictor)
    : sh_(sh), region_(region), evictor_(evictor) {
  evfd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (evfd_ < 0) throw InputError("eventfd failed (" + errno_name(errno) + ")");
  pending_.reserve(1024);
}

FaultHandler::~FaultHandler() {
  if (evfd_ >= 0) ::close(evfd_);
}

void FaultHandler::start() {
  if (started_) return;
  filler_->start();
  started_ = true;
  thread_ = std::thread([this] { loop(); });
}

void FaultHandler::set_priority() {
  PagerThreadStats t;
  t.started = true;
  t.nice_requested = sh_.cfg.thread_nice;
  const auto tid = static_cast<id_t>(::gettid());
  if (t.nice_requested && ::setpriority(PRIO_PROCESS, tid, *t.nice_requested) != 0) t.nice_errno = errno;
  errno = 0;
  t.nice = ::getpriority(PRIO_PROCESS, tid);  // -1 is a valid nice: errno tells the error
  if (errno != 0 && t.nice_errno == 0) t.nice_errno = errno;
  std::lock_guard lk(sh_.mu);
  sh_.st.thread = t;
}

void FaultHandler::shutdown(const std::function<void()>& quiesce) {
  if (shut_) return;
  shut_ = true;
  if (!started_) {
    std::lock_guard lk(sh_.mu);
    sh_.plan_shutdown = sh_.plan->shutdown();
    filler_->snapshot_source_stats_locked();
    filler_->record_close_locked();
    alloc_done_ = true;
    region_.finish_registration();
    return;
  }
  paused_ = false;
  stopping_ = true;  // from here the loop serves every fault it reads and prefetches nothing
  notify();
  std::exception_ptr quiesce_error;
  if (quiesce) {
    try {
      quiesce();
    } catch (...) {
      quiesce_error = std::current_exception();
    }
  }
  stopping_quiesced_ = true;  // the loop may now leave once nothing is pending
  notify();
  thread_.join();
  if (quiesce_error) std::rethrow_exception(quiesce_error);
}

void FaultHandler::notify() {
  const uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(evfd_, &one, sizeof one);
}

void FaultHandler::release_ahead_faults() {
  ahead_released_ = true;
  notify();
}

void FaultHandler::pause(bool on) {
  paused_ = on;
  notify();
}

void FaultHandler::add_latency_locked(PagerStats& s) const {
  s.fault_count = fault_hist_.count();
  s.fault_p50_ns = fault_hist_.quantile(0.5);
  s.fault_p99_ns = fault_hist_.quantile(0.99);
  s.fault_max_ns = fault_hist_.max();
  s.demand_fault_count = demand_hist_.count();
  s.demand_fault_p50_ns = demand_hist_.quantile(0.5);
  s.demand_fault_p99_ns = demand_hist_.quantile(0.99);
  s.demand_fault_max_ns = demand_hist_.max();
}

void FaultHandler::add_allocations_locked(SourceReport& r) const {
  r.alloc_counter_installed = alloc_hook_installed();
  const AllocCounts now = alloc_done_ ? alloc1_ : alloc_counts();
  r.dynamic_allocations = started_ ? now.read_path - alloc0_.read_path : 0;
  r.rejection_allocations = started_ ? now.rejection_path - alloc0_.rejection_path : 0;
}

}  // namespace resid
