#include "drivers/stream/stream_producer.hpp"

#include <chrono>
#include <cstring>

#include "core/alloc_count.hpp"
#include "core/clock.hpp"

namespace resid {

namespace {

FillOptions fill_options(const Plan& plan, const StreamConfig& cfg) {
  FillOptions o;
  o.copy_on_accept = true;  // a slot is invisible until its bundle is published
  // Every slot may hold a requested bundle; after a reset the forgotten ones keep nothing.
  o.max_fills = plan.slot_count();
  o.max_objects = cfg.bundle;
  return o;
}

}  // namespace

StreamProducer::StreamProducer(Source& src, Plan& plan, StreamShared& sh, const StreamLayout& lay,
                               const StreamConfig& cfg)
    : plan_(plan), sh_(sh), lay_(lay), cfg_(cfg), fill_(plan, src, static_cast<FillOwner&>(*this), fill_options(plan, cfg)),
      bstate_(lay.bundles, 0), bundle_of_fill_(plan.slot_count(), 0), objs_(cfg.bundle), tags_(cfg.bundle) {}

void StreamProducer::fail_internal(const char* what, PlanError e) {
  if (failing) return;
  failing = true;
  internal = what;
  internal_kind = e;
}

bool StreamProducer::copy(uint32_t, const CopyOrder& order, const Completion&, uint64_t) {
  std::memcpy(order.dst, order.src, order.bytes);  // the H2D analogue
  return true;
}

void StreamProducer::on_rejected(uint32_t, PlanError kind, const Completion& c) {
  // A fatal rejection: nothing more is requested, issued, copied or published.
  fill_.fail_closed();
  if (failing) return;
  failing = true;
  fail_kind = kind;
  RejectionPathScope scope;
  fail_source_error = c.error;
}

// held-consumer: no slot is free because consumer 0 holds one; try to reuse it. The Plan
// must refuse.
void StreamProducer::try_held_reuse() {
  if (cfg_.fault.cell != FaultCell::HeldConsumer || !sh_.holding.load() || sh_.refused.load()) return;
  cell.held_refusal = plan_.recycle(sh_.held_slot.load());
  if (cell.held_refusal == PlanError::None) fail_internal("the Plan recycled a slot a consumer holds", PlanError::None);
  cell.fired = true;
  sh_.refused.store(true);
  plan_.notify_all();
}

bool StreamProducer::request_bundles() {
  bool any = false;
  for (uint64_t b = low_; b < lay_.bundles && requested_ < plan_.slot_count(); ++b) {
    if (bstate_[b] != 0) continue;
    const uint64_t s0 = lay_.bundle_first_step(b);
    const uint32_t n = static_cast<uint32_t>(lay_.bundle_steps(b));
    for (uint32_t i = 0; i < n; ++i) {
      objs_[i] = lay_.step_object[s0 + i];
      tags_[i] = s0 + i;
    }
    auto r = plan_.request(objs_.data(), tags_.data(), n);
    if (r.error == PlanError::NoFreeSlot) {
      try_held_reuse();
      break;  // lowest first: no later bundle jumps the queue
    }
    const int fi = r.ok() ? fill_.track(r.value, objs_.data(), n) : -1;
    if (fi < 0) {
      fail_internal(r.ok() ? "no free fill record" : "request refused", r.error);
      break;
    }
    bundle_of_fill_[static_cast<size_t>(fi)] = b;
    bstate_[b] = 1;
    ++requested_;
    any = true;
  }
  return any;
}

void StreamProducer::do_reset(uint64_t read) {
  auto r = plan_.reset();
  if (!r.ok()) return fail_internal("reset refused", r.error);
  reset_fired_ = true;
  cell.fired = true;
  cell.read = static_cast<int64_t>(read);
  cell.reset_outstanding = r.value;
  // Every unpublished bundle was invalidated: request it again (lowest first). Its reads
  // still in flight come back StaleEpoch.
  fill_.forget_all();
  for (uint8_t& s : bstate_)
    if (s == 1) s = 0;
  requested_ = 0;
}

bool StreamProducer::issue_reads() {
  bool any = false;
  while (!failing && fill_.issue(1) == 1) {
    any = true;
    const uint64_t k = fill_.counters().reads_issued - 1;
    if (cfg_.fault.cell == FaultCell::ResetOutstanding && !reset_fired_ && k >= cfg_.fault.at) {
      do_reset(k);
      break;
    }
  }
  return any;
}

void StreamProducer::publish(uint32_t fi) {
  const PlanError e = fill_.publish(fi);
  if (e != PlanError::None) return fail_internal("publication refused", e);
  bstate_[bundle_of_fill_[fi]] = 2;
  --requested_;
  while (low_ < lay_.bundles && bstate_[low_] == 2) ++low_;
}

void StreamProducer::run() {
  ReadPathScope scope;
  uint64_t last_progress = now_ns();
  while (!failing && low_ < lay_.bundles) {
    const uint64_t v = plan_.version();
    bool progress = plan_.recycle_ready() > 0;
    progress |= request_bundles();
    if (!failing) progress |= issue_reads();
    // One completion per call: the queue is refilled right after it, so the in-flight depth
    // stays at its bound instead of draining between batches.
    if (!failing) progress |= fill_.reap(!progress, 1) > 0;
    if (failing || low_ >= lay_.bundles) break;
    if (sh_.stop.load()) {
      fail_internal("a consumer failed", static_cast<PlanError>(sh_.consumer_error.load()));
      break;
    }
    const uint64_t t = now_ns();
    if (progress) {
      last_progress = t;
      continue;
    }
    if (t - last_progress > sh_.watchdog_ns()) {
      watchdog = true;
      fail_internal("watchdog: no progress", PlanError::None);
      break;
    }
    plan_.wait_change(v, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
  }
}

void StreamProducer::fail_closed() {
  ReadPathScope scope;
  fill_.fail_closed();
  abandoned = fill_.close();
  sh_.halt();
}

}  // namespace resid
