#include "drivers/stream/stream_consumer.hpp"

#include <chrono>

#include "core/alloc_count.hpp"
#include "core/clock.hpp"
#include "drivers/stream/stream_verify.hpp"

namespace resid {

namespace {

using Clock = std::chrono::steady_clock;

void consumer_fail(StreamShared& sh, PlanError e, uint64_t step) {
  uint8_t none = 0;
  if (sh.consumer_error.compare_exchange_strong(none, static_cast<uint8_t>(e))) sh.consumer_error_step.store(static_cast<int64_t>(step));
  sh.halt();
}

// Waits for step s's version; false (after consumer_fail) when the stream stops or fails.
bool acquire_step(StreamShared& sh, uint64_t s, ConsumerTicket& t) {
  const uint32_t obj = sh.lay.step_object[s];
  const uint64_t since = now_ns();
  for (;;) {
    if (sh.stop.load()) return false;
    const uint64_t v = sh.plan.version();
    auto r = sh.plan.acquire(s, obj);
    if (r.ok()) {
      t = r.value;
      return true;
    }
    if (r.error != PlanError::NotPublished) {
      consumer_fail(sh, r.error, s);
      return false;
    }
    if (now_ns() - since > sh.watchdog_ns()) {
      sh.consumer_watchdog.store(true);
      consumer_fail(sh, PlanError::NotPublished, s);
      return false;
    }
    sh.plan.wait_change(v, Clock::now() + std::chrono::milliseconds(100));
  }
}

// The held-consumer and shutdown-live-consumer cells: hold the version until the producer
// has tried (and been refused) to reuse it or to shut down under it; then check that it was
// not touched meanwhile.
void hold_version(StreamShared& sh, const ConsumerTicket& t, uint64_t s) {
  const uint64_t h0 = now_ns();
  sh.held_slot.store(t.slot);
  sh.held_step.store(s);
  sh.holding.store(true);
  sh.plan.notify_all();
  while (!sh.refused.load() && !sh.stop.load()) {
    if (now_ns() - h0 > sh.watchdog_ns()) {
      sh.consumer_watchdog.store(true);
      break;
    }
    sh.plan.wait_change(sh.plan.version(), Clock::now() + std::chrono::milliseconds(20));
  }
  if (sh.plan.slot_generation(t.slot) != t.generation || sh.plan.slot_phase(t.slot) != SlotPhase::InUse)
    sh.held_survived.store(false);
  sh.held_ns.store(now_ns() - h0);
  sh.holding.store(false);
  sh.held_done.store(true);
}

// The last consumer of step s compares the step's sum with the reference.
void verify_step(StreamShared& sh, uint64_t s, uint32_t obj) {
  const uint64_t sum = sh.step_sum[s].load(std::memory_order_acquire);
  if (sum != sh.ref[obj]) {
    sh.mismatches.fetch_add(1);
    int64_t none = -1;
    sh.first_mismatch_step.compare_exchange_strong(none, static_cast<int64_t>(s));
  }
  sh.objects_verified.fetch_add(1);
  sh.bytes_verified.fetch_add(sh.m.object(obj).logical_bytes);
}

}  // namespace

void consume(StreamShared& sh, uint32_t me) {
  ReadPathScope scope;
  const uint32_t n = sh.cfg.consumers;
  const FaultSpec& f = sh.cfg.fault;
  for (uint64_t s = 0; s < sh.lay.steps; ++s) {
    const uint32_t obj = sh.lay.step_object[s];
    ConsumerTicket t;
    if (!acquire_step(sh, s, t)) return;
    sh.step_sum[s].fetch_add(consumer_partial(sh.m, obj, t.data, me, n), std::memory_order_relaxed);
    if (me == 0 && ((f.cell == FaultCell::HeldConsumer && s == f.at) ||
                    (f.cell == FaultCell::ShutdownLiveConsumer && s + 1 == sh.lay.steps)))
      hold_version(sh, t, s);
    const PlanError e = sh.plan.release(t);
    if (e != PlanError::None) return consumer_fail(sh, e, s);
    if (sh.step_done[s].fetch_add(1, std::memory_order_acq_rel) + 1 == n) verify_step(sh, s, obj);
  }
}

}  // namespace resid
