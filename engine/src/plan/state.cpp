#include "plan/state.hpp"

#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace resid {

const char* to_string(SlotPhase p) {
  switch (p) {
    case SlotPhase::Vacant: return "VACANT";
    case SlotPhase::Loading: return "LOADING";
    case SlotPhase::DeviceReady: return "DEVICE_READY";
    case SlotPhase::InUse: return "IN_USE";
    case SlotPhase::Recyclable: return "RECYCLABLE";
  }
  return "?";
}

const char* to_string(PlanError e) {
  switch (e) {
    case PlanError::None: return "none";
    case PlanError::InvalidTransition: return "invalid-transition";
    case PlanError::InvalidArgument: return "invalid-argument";
    case PlanError::NoFreeSlot: return "no-free-slot";
    case PlanError::UnknownTicket: return "unknown-ticket";
    case PlanError::StaleEpoch: return "stale-epoch";
    case PlanError::StaleGeneration: return "stale-generation";
    case PlanError::WrongObject: return "wrong-object";
    case PlanError::WrongExtent: return "wrong-extent";
    case PlanError::WindowMismatch: return "window-mismatch";
    case PlanError::ShortRead: return "short-read";
    case PlanError::ReadFailed: return "read-failed";
    case PlanError::ExtentOutsideFile: return "extent-outside-file";
    case PlanError::ExtentTooLarge: return "extent-too-large";
    case PlanError::SizeMismatch: return "size-mismatch";
    case PlanError::ContentMismatch: return "content-mismatch";
    case PlanError::BundleFailed: return "bundle-failed";
    case PlanError::BundleIncomplete: return "bundle-incomplete";
    case PlanError::NotPublished: return "not-published";
    case PlanError::ConsumersLive: return "consumers-live";
    case PlanError::NotConsumed: return "not-consumed";
    case PlanError::OutstandingReads: return "outstanding-reads";
    case PlanError::ShutDown: return "shut-down";
    case PlanError::Count: break;
  }
  return "?";
}

bool is_fatal_rejection(PlanError e) { return e != PlanError::None && e != PlanError::StaleEpoch; }

namespace {

constexpr uint32_t tag_window(uint64_t tag) { return static_cast<uint32_t>(tag & 0xffffffffu); }
constexpr uint32_t tag_serial(uint64_t tag) { return static_cast<uint32_t>(tag >> 32); }
constexpr uint64_t make_tag(uint32_t serial, uint32_t window) {
  return (static_cast<uint64_t>(serial) << 32) | window;
}

PlanError reason_error(RejectReason r) {
  switch (r) {
    case RejectReason::ShortRead: return PlanError::ShortRead;
    case RejectReason::OutsideFile: return PlanError::ExtentOutsideFile;
    case RejectReason::TooLarge: return PlanError::ExtentTooLarge;
    case RejectReason::ContentMismatch: return PlanError::ContentMismatch;
    case RejectReason::None:
    case RejectReason::Failed: break;
  }
  return PlanError::ReadFailed;
}

}  // namespace

Plan::Plan(const PlanManifest& manifest, PlanConfig cfg) : m_(manifest), cfg_(std::move(cfg)) {
  if (cfg_.windows == 0) throw std::invalid_argument("plan: no windows");
  if (cfg_.slot_addresses.empty()) throw std::invalid_argument("plan: no slots");
  if (cfg_.consumers == 0) throw std::invalid_argument("plan: a version needs at least one consumer");
  if (cfg_.max_bundle == 0 || cfg_.max_bundle > cfg_.slot_addresses.size())
    throw std::invalid_argument("plan: bundle size must be between 1 and the slot count");
  if (cfg_.slot_bytes < manifest.slot_bytes_needed())
    throw std::invalid_argument("plan: slots of " + std::to_string(cfg_.slot_bytes) +
                                " bytes cannot hold the largest object (" +
                                std::to_string(manifest.slot_bytes_needed()) + ")");
  windows_.assign(cfg_.windows, WindowPhase::Free);
  tickets_.resize(cfg_.windows);
  slots_.resize(cfg_.slot_addresses.size());
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].addr = cfg_.slot_addresses[i];
  bundles_.resize(slots_.size());
  for (auto& b : bundles_) b.slots.reserve(cfg_.max_bundle);
  scratch_slots_.reserve(cfg_.max_bundle);
  scratch_.assign(slots_.size(), 0);
}

// ---- helpers (lock held) -----------------------------------------------------------------

PlanError Plan::fail(PlanError e) {
  ++c_.errors[static_cast<size_t>(e)];
  return e;
}

void Plan::transitioned(bool wake) {
  ++c_.transitions;
  ++version_;
  if (cfg_.eager_reconcile) check_locked();
  // Waiters (consumers waiting for a publication, a producer waiting for a slot) care about
  // publications, releases and the invalidation edges; the per-read transitions in between
  // would only wake them for nothing.
  if (wake) cv_.notify_all();
}

Plan::Bundle* Plan::bundle_of(BundleHandle h) {
  const uint32_t i = static_cast<uint32_t>(h & 0xffffffffu);
  if (i >= bundles_.size()) return nullptr;
  Bundle& b = bundles_[i];
  if (!b.live || b.serial != static_cast<uint32_t>(h >> 32)) return nullptr;
  return &b;
}

const Plan::Bundle* Plan::bundle_of(BundleHandle h) const {
  return const_cast<Plan*>(this)->bundle_of(h);
}

void Plan::vacate(Slot& s, int32_t /*index*/) {
  s.phase = SlotPhase::Vacant;
  s.bundle = -1;
  s.abandoned = false;
  s.pieces_issued = s.pieces_copied = s.pending = 0;
  s.landed = 0;
  // Open consumers hold the slot itself, whatever version it holds (or none).
  if (!cfg_.open_consumers) s.consumers = 0;
  s.acquired = s.finished = 0;
  s.tag = 0;
}

void Plan::maybe_free_bundle(uint32_t bi) {
  Bundle& b = bundles_[bi];
  if (!b.live) return;
  for (int32_t si : b.slots)
    if (slots_[static_cast<size_t>(si)].bundle == static_cast<int32_t>(bi)) return;
  b.live = false;
  b.slots.clear();
}

void Plan::fail_bundle(uint32_t bi) {
  Bundle& b = bundles_[bi];
  if (!b.live || b.failed) return;
  b.failed = true;
  ++c_.bundles_failed;
  for (int32_t si : b.slots) {
    Slot& s = slots_[static_cast<size_t>(si)];
    if (s.bundle != static_cast<int32_t>(bi)) continue;
    s.abandoned = true;
    if (s.pending == 0) vacate(s, si);
  }
  maybe_free_bundle(bi);
}

void Plan::invalidate_bundle(uint32_t bi) {
  Bundle& b = bundles_[bi];
  if (!b.live) return;
  if (!b.failed) ++c_.bundles_invalidated;
  b.failed = true;
  for (int32_t si : b.slots) {
    Slot& s = slots_[static_cast<size_t>(si)];
    if (s.bundle != static_cast<int32_t>(bi)) continue;
    s.abandoned = true;
    if (s.pending == 0) vacate(s, si);
  }
  maybe_free_bundle(bi);
}

void Plan::retire(Ticket& t, int32_t window) {
  t.live = false;
  t.host = nullptr;
  windows_[static_cast<size_t>(window)] = WindowPhase::Free;
  ++c_.tickets_retired;
  Slot& s = slots_[static_cast<size_t>(t.slot)];
  --s.pending;
  if (s.abandoned && s.pending == 0) vacate(s, t.slot);
  maybe_free_bundle(t.bundle);
}

void Plan::reject(PlanError kind, const Ticket& t, int32_t window, const Completion& c,
                  uint32_t claimed_object) {
  fail(kind);
  if (first_rejection_.kind != PlanError::None) return;
  first_rejection_.kind = kind;
  first_rejection_.tag = c.tag;
  first_rejection_.window = window;
  first_rejection_.slot = t.slot;
  first_rejection_.object = t.object;
  first_rejection_.piece = t.piece;
  first_rejection_.generation = t.generation;
  first_rejection_.epoch = t.epoch;
  first_rejection_.claimed_offset = c.extent.offset;
  first_rejection_.claimed_length = c.extent.length;
  first_rejection_.claimed_object = claimed_object;
}

// ---- producer ------------------------------------------------------------------------------

PlanResult<BundleHandle> Plan::request(const uint32_t* objects, const uint64_t* tags, uint32_t n) {
  std::lock_guard lk(mu_);
  if (shut_down_) return {fail(PlanError::ShutDown)};
  if (n == 0 || n > cfg_.max_bundle) return {fail(PlanError::InvalidArgument)};
  for (uint32_t i = 0; i < n; ++i)
    if (objects[i] >= m_.object_count()) return {fail(PlanError::InvalidArgument)};
  uint32_t vacant = 0;
  for (const Slot& s : slots_) vacant += s.phase == SlotPhase::Vacant;
  if (vacant < n) return {fail(PlanError::NoFreeSlot)};
  uint32_t bi = 0;
  while (bi < bundles_.size() && bundles_[bi].live) ++bi;
  if (bi == bundles_.size()) return {fail(PlanError::NoFreeSlot)};  // unreachable: one slot per bundle at least
  std::vector<int32_t>& chosen = scratch_slots_;  // reserved capacity: no allocation here
  chosen.clear();
  for (int32_t si = 0; chosen.size() < n; ++si)
    if (slots_[static_cast<size_t>(si)].phase == SlotPhase::Vacant) chosen.push_back(si);
  return start_bundle(bi, chosen.data(), objects, tags, n);
}

PlanResult<BundleHandle> Plan::request_slots(const int32_t* slots, const uint32_t* objects, const uint64_t* tags,
                                             uint32_t n) {
  std::lock_guard lk(mu_);
  if (shut_down_) return {fail(PlanError::ShutDown)};
  if (n == 0 || n > cfg_.max_bundle) return {fail(PlanError::InvalidArgument)};
  for (uint32_t i = 0; i < n; ++i) {
    if (objects[i] >= m_.object_count() || slots[i] < 0 || static_cast<size_t>(slots[i]) >= slots_.size())
      return {fail(PlanError::InvalidArgument)};
    if (slots_[static_cast<size_t>(slots[i])].phase != SlotPhase::Vacant) return {fail(PlanError::InvalidTransition)};
    for (uint32_t k = 0; k < i; ++k)
      if (slots[k] == slots[i]) return {fail(PlanError::InvalidArgument)};
  }
  uint32_t bi = 0;
  while (bi < bundles_.size() && bundles_[bi].live) ++bi;
  if (bi == bundles_.size()) return {fail(PlanError::NoFreeSlot)};  // unreachable: a live bundle holds a slot
  return start_bundle(bi, slots, objects, tags, n);
}

PlanResult<BundleHandle> Plan::start_bundle(uint32_t bi, const int32_t* slots, const uint32_t* objects,
                                            const uint64_t* tags, uint32_t n) {
  Bundle& b = bundles_[bi];
  b.live = true;
  b.failed = false;
  ++b.serial;
  b.epoch = epoch_;
  b.count = n;
  b.slots.clear();
  for (uint32_t i = 0; i < n; ++i) {
    Slot& s = slots_[static_cast<size_t>(slots[i])];
    vacate(s, slots[i]);
    s.phase = SlotPhase::Loading;
    ++s.generation;
    s.epoch = epoch_;
    s.object = objects[i];
    s.tag = tags[i];
    s.bundle = static_cast<int32_t>(bi);
    b.slots.push_back(slots[i]);  // within the reserved capacity
  }
  ++c_.requests;
  transitioned(false);
  return {PlanError::None, (static_cast<uint64_t>(b.serial) << 32) | bi};
}

PlanResult<int32_t> Plan::bundle_slot(BundleHandle h, uint32_t i) const {
  std::lock_guard lk(mu_);
  const Bundle* b = bundle_of(h);
  if (!b || i >= b->count) return {PlanError::InvalidArgument};
  return {PlanError::None, b->slots[i]};
}

PlanResult<uint64_t> Plan::begin_read(BundleHandle h, int32_t slot, uint32_t piece, int32_t window) {
  std::lock_guard lk(mu_);
  if (shut_down_) return {fail(PlanError::ShutDown)};
  Bundle* b = bundle_of(h);
  if (!b || slot < 0 || static_cast<size_t>(slot) >= slots_.size() || window < 0 ||
      static_cast<size_t>(window) >= windows_.size())
    return {fail(PlanError::InvalidArgument)};
  const uint32_t bi = static_cast<uint32_t>(h & 0xffffffffu);
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.bundle != static_cast<int32_t>(bi)) return {fail(PlanError::InvalidArgument)};
  if (b->failed) return {fail(PlanError::BundleFailed)};
  if (b->epoch != epoch_) return {fail(PlanError::StaleEpoch)};
  if (s.phase != SlotPhase::Loading || s.abandoned) return {fail(PlanError::InvalidTransition)};
  const PlanObject& o = m_.object(s.object);
  if (s.pieces_issued >= o.pieces || piece != o.first_piece + s.pieces_issued)
    return {fail(PlanError::InvalidArgument)};
  if (windows_[static_cast<size_t>(window)] != WindowPhase::Free) return {fail(PlanError::InvalidTransition)};
  Ticket& t = tickets_[static_cast<size_t>(window)];
  windows_[static_cast<size_t>(window)] = WindowPhase::Reading;
  ++t.serial;
  t.live = true;
  t.object = s.object;
  t.piece = piece;
  t.generation = s.generation;
  t.epoch = epoch_;
  t.slot = slot;
  t.bundle = bi;
  t.host = nullptr;
  ++s.pieces_issued;
  ++s.pending;
  ++c_.tickets_issued;
  transitioned(false);
  return {PlanError::None, make_tag(t.serial, static_cast<uint32_t>(window))};
}

PlanResult<CompleteVerdict> Plan::complete_read(const Completion& c) {
  std::lock_guard lk(mu_);
  const uint32_t w = tag_window(c.tag);
  if (w >= tickets_.size()) {
    ++c_.completions_refused;
    reject(PlanError::UnknownTicket, Ticket{}, -1, c, UINT32_MAX);
    return {PlanError::UnknownTicket};
  }
  Ticket& t = tickets_[w];
  if (!t.live || t.serial != tag_serial(c.tag)) {
    // A late duplicate of an earlier read on this window: the version it names is gone.
    ++c_.completions_refused;
    Ticket ghost = t;
    reject(PlanError::StaleGeneration, ghost, static_cast<int32_t>(w), c, UINT32_MAX);
    return {PlanError::StaleGeneration};
  }
  if (windows_[w] != WindowPhase::Reading) {
    ++c_.completions_refused;  // a second completion for an accepted read
    return {fail(PlanError::InvalidTransition)};
  }
  CompleteVerdict v;
  v.bundle = (static_cast<uint64_t>(bundles_[t.bundle].serial) << 32) | t.bundle;
  v.object = t.object;
  v.piece = t.piece;
  v.slot = t.slot;
  const int32_t wi = static_cast<int32_t>(w);
  if (t.epoch != epoch_) {  // submitted before a reset: invalidated, as reset promised
    fail(PlanError::StaleEpoch);
    ++c_.tickets_invalidated;
    retire(t, wi);
    transitioned();
    return {PlanError::StaleEpoch, v};
  }
  const Slot& s = slots_[static_cast<size_t>(t.slot)];
  const PlanPiece& p = m_.piece(t.piece);
  PlanError kind = PlanError::None;
  uint32_t claimed = UINT32_MAX;
  if (c.window != wi) {
    kind = PlanError::WindowMismatch;
  } else if (s.generation != t.generation || s.phase != SlotPhase::Loading) {
    kind = PlanError::StaleGeneration;
  } else if (s.object != t.object) {
    kind = PlanError::WrongObject;
  } else if (c.extent.offset != p.offset || c.extent.length != p.length) {
    const auto other = m_.object_of_piece_range(c.extent);
    if (other && *other != t.object) {
      kind = PlanError::WrongObject;
      claimed = *other;
    } else {
      kind = PlanError::WrongExtent;
    }
  } else if (!c.ok()) {
    kind = reason_error(c.reason);
  } else if (bundles_[t.bundle].failed) {
    // Another piece of this bundle failed: the bytes are dropped, never copied.
    fail(PlanError::BundleFailed);
    ++c_.tickets_rejected;
    retire(t, wi);
    transitioned();
    return {PlanError::BundleFailed, v};
  }
  if (kind != PlanError::None) {
    reject(kind, t, wi, c, claimed);
    ++c_.tickets_rejected;
    const uint32_t bi = t.bundle;
    retire(t, wi);
    fail_bundle(bi);
    transitioned();
    return {kind, v};
  }
  windows_[w] = WindowPhase::HostReady;
  t.host = c.data;
  v.accepted = true;
  transitioned(false);
  return {PlanError::None, v};
}

PlanResult<CopyOrder> Plan::begin_copy(uint64_t tag) {
  std::lock_guard lk(mu_);
  const uint32_t w = tag_window(tag);
  if (w >= tickets_.size()) return {fail(PlanError::UnknownTicket)};
  Ticket& t = tickets_[w];
  if (!t.live || t.serial != tag_serial(tag)) return {fail(PlanError::StaleGeneration)};
  if (windows_[w] != WindowPhase::HostReady) return {fail(PlanError::InvalidTransition)};
  if (t.epoch != epoch_) {
    fail(PlanError::StaleEpoch);
    ++c_.tickets_invalidated;
    retire(t, static_cast<int32_t>(w));
    transitioned();
    return {PlanError::StaleEpoch};
  }
  if (bundles_[t.bundle].failed) {
    fail(PlanError::BundleFailed);
    ++c_.tickets_rejected;
    retire(t, static_cast<int32_t>(w));
    transitioned();
    return {PlanError::BundleFailed};
  }
  windows_[w] = WindowPhase::Copying;
  const PlanPiece& p = m_.piece(t.piece);
  CopyOrder o;
  o.dst = slots_[static_cast<size_t>(t.slot)].addr + p.slot_offset;
  o.src = t.host;
  o.bytes = p.length;
  o.piece = t.piece;
  transitioned(false);
  return {PlanError::None, o};
}

PlanResult<EndCopyVerdict> Plan::end_copy(uint64_t tag) {
  std::lock_guard lk(mu_);
  const uint32_t w = tag_window(tag);
  if (w >= tickets_.size()) return {fail(PlanError::UnknownTicket)};
  Ticket& t = tickets_[w];
  if (!t.live || t.serial != tag_serial(tag)) return {fail(PlanError::StaleGeneration)};
  if (windows_[w] != WindowPhase::Copying) return {fail(PlanError::InvalidTransition)};
  EndCopyVerdict v;
  const uint32_t bi = t.bundle;
  v.bundle = (static_cast<uint64_t>(bundles_[bi].serial) << 32) | bi;
  if (t.epoch != epoch_ || bundles_[bi].failed) {
    const PlanError e = t.epoch != epoch_ ? PlanError::StaleEpoch : PlanError::BundleFailed;
    fail(e);
    if (e == PlanError::StaleEpoch) ++c_.tickets_invalidated; else ++c_.tickets_rejected;
    retire(t, static_cast<int32_t>(w));
    transitioned();
    return {e, v};
  }
  Slot& s = slots_[static_cast<size_t>(t.slot)];
  s.landed += m_.piece(t.piece).length;
  ++s.pieces_copied;
  ++c_.tickets_copied;
  retire(t, static_cast<int32_t>(w));
  bool complete = true;
  for (int32_t si : bundles_[bi].slots) {
    const Slot& x = slots_[static_cast<size_t>(si)];
    if (x.pieces_copied != m_.object(x.object).pieces) complete = false;
  }
  v.bundle_complete = complete;
  transitioned(false);
  return {PlanError::None, v};
}

PlanError Plan::publish(BundleHandle h) {
  std::lock_guard lk(mu_);
  if (shut_down_) return fail(PlanError::ShutDown);
  Bundle* b = bundle_of(h);
  if (!b) return fail(PlanError::InvalidArgument);
  if (b->failed) return fail(PlanError::BundleFailed);
  if (b->epoch != epoch_) return fail(PlanError::StaleEpoch);
  const uint32_t bi = static_cast<uint32_t>(h & 0xffffffffu);
  for (int32_t si : b->slots) {
    const Slot& s = slots_[static_cast<size_t>(si)];
    const PlanObject& o = m_.object(s.object);
    if (s.phase != SlotPhase::Loading || s.abandoned) return fail(PlanError::InvalidTransition);
    if (s.pending != 0 || s.pieces_copied != o.pieces) return fail(PlanError::BundleIncomplete);
  }
  for (int32_t si : b->slots) {
    const Slot& s = slots_[static_cast<size_t>(si)];
    if (s.landed != m_.object(s.object).logical_bytes) {
      // Object-size disagreement at publication: the bundle can never become visible.
      fail(PlanError::SizeMismatch);
      if (first_rejection_.kind == PlanError::None) {
        first_rejection_.kind = PlanError::SizeMismatch;
        first_rejection_.slot = si;
        first_rejection_.object = s.object;
        first_rejection_.generation = s.generation;
        first_rejection_.epoch = s.epoch;
        first_rejection_.claimed_length = s.landed;
      }
      fail_bundle(bi);
      transitioned();
      return PlanError::SizeMismatch;
    }
  }
  if (b->failed) ++published_failed_;  // guarded above; eager reconcile watches it
  for (int32_t si : b->slots) {
    Slot& s = slots_[static_cast<size_t>(si)];
    // Open consumers: a slot held before its version was published is in use at once.
    s.phase = cfg_.open_consumers && s.consumers > 0 ? SlotPhase::InUse : SlotPhase::DeviceReady;
    s.bundle = -1;
    ++c_.objects_published;
    c_.bytes_published += s.landed;
  }
  b->live = false;
  b->slots.clear();
  ++c_.bundles_published;
  transitioned();
  return PlanError::None;
}

PlanError Plan::recycle(int32_t slot) {
  std::lock_guard lk(mu_);
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return fail(PlanError::InvalidArgument);
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (cfg_.open_consumers) {
    // A live consumer forbids reuse in every phase; an unheld published version may go.
    if (s.consumers > 0 || s.phase == SlotPhase::InUse) {
      ++c_.recycle_refusals;
      return fail(PlanError::ConsumersLive);
    }
    if (s.phase != SlotPhase::Recyclable && s.phase != SlotPhase::DeviceReady) return fail(PlanError::InvalidTransition);
    if (s.phase == SlotPhase::DeviceReady) ++c_.recycled_unconsumed;
  } else {
    if (s.phase == SlotPhase::InUse || s.phase == SlotPhase::DeviceReady) {
      ++c_.recycle_refusals;
      return fail(s.consumers > 0 ? PlanError::ConsumersLive : PlanError::NotConsumed);
    }
    if (s.phase != SlotPhase::Recyclable) return fail(PlanError::InvalidTransition);
  }
  vacate(s, slot);
  ++c_.recycles;
  transitioned();
  return PlanError::None;
}

uint32_t Plan::recycle_ready() {
  std::lock_guard lk(mu_);
  uint32_t n = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].phase != SlotPhase::Recyclable) continue;
    vacate(slots_[i], static_cast<int32_t>(i));
    ++c_.recycles;
    ++n;
  }
  if (n) transitioned();
  return n;
}

PlanResult<uint32_t> Plan::reset() {
  std::lock_guard lk(mu_);
  if (shut_down_) return {fail(PlanError::ShutDown)};
  uint32_t outstanding = 0;
  for (const Ticket& t : tickets_) outstanding += t.live;
  ++epoch_;
  ++c_.resets;
  for (uint32_t bi = 0; bi < bundles_.size(); ++bi) invalidate_bundle(bi);
  transitioned();
  return {PlanError::None, outstanding};
}

uint32_t Plan::abandon_tickets() {
  std::lock_guard lk(mu_);
  uint32_t n = 0;
  for (size_t w = 0; w < tickets_.size(); ++w) {
    Ticket& t = tickets_[w];
    if (!t.live) continue;
    const uint32_t bi = t.bundle;
    ++c_.tickets_abandoned;
    retire(t, static_cast<int32_t>(w));
    fail_bundle(bi);  // its piece never lands: the bundle can never publish
    ++n;
  }
  if (n) transitioned();
  return n;
}

PlanError Plan::shutdown() {
  std::lock_guard lk(mu_);
  if (shut_down_) return fail(PlanError::ShutDown);
  for (const Ticket& t : tickets_)
    if (t.live) {
      ++c_.shutdown_refusals;
      return fail(PlanError::OutstandingReads);
    }
  for (const Slot& s : slots_)
    if (s.consumers > 0) {
      ++c_.shutdown_refusals;
      return fail(PlanError::ConsumersLive);
    }
  for (uint32_t bi = 0; bi < bundles_.size(); ++bi) invalidate_bundle(bi);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.phase == SlotPhase::DeviceReady || s.phase == SlotPhase::InUse ||
        (cfg_.open_consumers && s.phase == SlotPhase::Recyclable))
      ++c_.versions_discarded;
    if (s.phase != SlotPhase::Vacant) vacate(s, static_cast<int32_t>(i));
  }
  shut_down_ = true;
  transitioned();
  return PlanError::None;
}

// ---- consumers -----------------------------------------------------------------------------

PlanResult<ConsumerTicket> Plan::acquire(uint64_t tag, uint32_t object) {
  std::lock_guard lk(mu_);
  if (shut_down_) return {fail(PlanError::ShutDown)};
  if (cfg_.open_consumers) return {fail(PlanError::InvalidTransition)};  // hold/unhold instead
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if ((s.phase != SlotPhase::DeviceReady && s.phase != SlotPhase::InUse && s.phase != SlotPhase::Recyclable) ||
        s.tag != tag)
      continue;
    if (s.object != object) return {fail(PlanError::WrongObject)};
    // RECYCLABLE -> IN_USE is not a transition: every declared consumer already finished.
    if (s.phase == SlotPhase::Recyclable || s.acquired >= cfg_.consumers) return {fail(PlanError::InvalidTransition)};
    s.phase = SlotPhase::InUse;
    ++s.consumers;
    ++s.acquired;
    ++c_.consumer_acquires;
    ConsumerTicket t;
    t.slot = static_cast<int32_t>(i);
    t.object = s.object;
    t.generation = s.generation;
    t.epoch = s.epoch;
    t.tag = s.tag;
    t.data = s.addr;
    transitioned(false);
    return {PlanError::None, t};
  }
  return {PlanError::NotPublished};  // "not yet": polled, not counted as an error
}

PlanError Plan::release(const ConsumerTicket& t) {
  std::lock_guard lk(mu_);
  if (cfg_.open_consumers) return fail(PlanError::InvalidTransition);  // hold/unhold instead
  if (t.slot < 0 || static_cast<size_t>(t.slot) >= slots_.size()) return fail(PlanError::InvalidArgument);
  Slot& s = slots_[static_cast<size_t>(t.slot)];
  if (s.generation != t.generation) return fail(PlanError::StaleGeneration);
  if (s.phase != SlotPhase::InUse || s.consumers == 0) return fail(PlanError::InvalidTransition);
  if (s.object != t.object || s.tag != t.tag) return fail(PlanError::WrongObject);
  --s.consumers;
  ++s.finished;
  ++c_.consumer_releases;
  if (s.consumers == 0 && s.finished == cfg_.consumers) s.phase = SlotPhase::Recyclable;
  transitioned();
  return PlanError::None;
}

PlanError Plan::hold(int32_t slot) {
  std::lock_guard lk(mu_);
  if (shut_down_) return fail(PlanError::ShutDown);
  if (!cfg_.open_consumers) return fail(PlanError::InvalidTransition);
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return fail(PlanError::InvalidArgument);
  Slot& s = slots_[static_cast<size_t>(slot)];
  ++s.consumers;
  ++c_.consumer_acquires;
  // DEVICE_READY -> IN_USE (first consumer), RECYCLABLE -> IN_USE (the cached version reused);
  // VACANT and LOADING keep their phase: the version the consumer waits for is not visible yet.
  const bool visible = s.phase == SlotPhase::DeviceReady || s.phase == SlotPhase::Recyclable;
  if (visible) s.phase = SlotPhase::InUse;
  transitioned(visible);
  return PlanError::None;
}

PlanError Plan::unhold(int32_t slot) {
  std::lock_guard lk(mu_);
  if (shut_down_) return fail(PlanError::ShutDown);
  if (!cfg_.open_consumers) return fail(PlanError::InvalidTransition);
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return fail(PlanError::InvalidArgument);
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.consumers == 0) return fail(PlanError::InvalidTransition);
  --s.consumers;
  ++c_.consumer_releases;
  const bool last = s.consumers == 0 && s.phase == SlotPhase::InUse;
  if (last) s.phase = SlotPhase::Recyclable;
  transitioned(last);
  return PlanError::None;
}

// ---- observation ---------------------------------------------------------------------------

uint64_t Plan::version() const {
  std::lock_guard lk(mu_);
  return version_;
}

uint64_t Plan::wait_change(uint64_t seen, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lk(mu_);
  cv_.wait_until(lk, deadline, [&] { return version_ != seen; });
  return version_;
}

PlanCounters Plan::counters() const {
  std::lock_guard lk(mu_);
  return c_;
}

PlanBalance Plan::balance() const {
  std::lock_guard lk(mu_);
  PlanBalance b;
  b.windows = static_cast<uint32_t>(windows_.size());
  b.slots = static_cast<uint32_t>(slots_.size());
  for (size_t w = 0; w < windows_.size(); ++w) {
    b.windows_free += windows_[w] == WindowPhase::Free;
    b.live_tickets += tickets_[w].live;
  }
  uint32_t consumers = 0;
  for (const Slot& s : slots_) {
    b.slots_vacant += s.phase == SlotPhase::Vacant;
    consumers += s.consumers;
  }
  b.tickets_balanced = b.live_tickets == 0 && c_.tickets_issued == c_.tickets_retired;
  b.consumers_balanced = consumers == 0 && c_.consumer_acquires == c_.consumer_releases;
  b.shut_down = shut_down_;
  return b;
}

RejectionRecord Plan::first_rejection() const {
  std::lock_guard lk(mu_);
  return first_rejection_;
}

std::string Plan::first_violation() const {
  std::lock_guard lk(mu_);
  return first_violation_;
}

uint64_t Plan::epoch() const {
  std::lock_guard lk(mu_);
  return epoch_;
}

WindowPhase Plan::window_phase(int32_t w) const {
  std::lock_guard lk(mu_);
  return windows_.at(static_cast<size_t>(w));
}

SlotPhase Plan::slot_phase(int32_t s) const {
  std::lock_guard lk(mu_);
  return slots_.at(static_cast<size_t>(s)).phase;
}

uint64_t Plan::slot_generation(int32_t s) const {
  std::lock_guard lk(mu_);
  return slots_.at(static_cast<size_t>(s)).generation;
}

uint32_t Plan::slot_consumers(int32_t s) const {
  std::lock_guard lk(mu_);
  return slots_.at(static_cast<size_t>(s)).consumers;
}

uint32_t Plan::slots_vacant() const {
  std::lock_guard lk(mu_);
  uint32_t n = 0;
  for (const Slot& s : slots_) n += s.phase == SlotPhase::Vacant;
  return n;
}

uint32_t Plan::live_tickets() const {
  std::lock_guard lk(mu_);
  uint32_t n = 0;
  for (const Ticket& t : tickets_) n += t.live;
  return n;
}

bool Plan::reconcile() {
  std::lock_guard lk(mu_);
  return check_locked();
}

void Plan::slot_states(SlotPhase* phases, uint32_t* consumers) const {
  std::lock_guard lk(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    phases[i] = slots_[i].phase;
    consumers[i] = slots_[i].consumers;
  }
}

// ---- the invariant check ---------------------------------------------------------------------

// The first violation is kept (formatted into a fixed buffer: no allocation).
void Plan::violation(const char* fmt, ...) {
  if (check_ok_ && first_violation_[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(first_violation_, sizeof first_violation_, fmt, ap);
    va_end(ap);
  }
  check_ok_ = false;
}

// Every live ticket names a LOADING slot of its own object, generation, epoch and bundle;
// counts the tickets per slot into scratch_. Returns the live tickets.
uint32_t Plan::check_tickets_locked() {
  for (auto& x : scratch_) x = 0;
  uint32_t live = 0;
  for (size_t w = 0; w < windows_.size(); ++w) {
    const Ticket& t = tickets_[w];
    if ((windows_[w] == WindowPhase::Free) == t.live)
      violation("window %zu is %s but its ticket is %s", w, to_string(windows_[w]), t.live ? "live" : "retired");
    if (!t.live) continue;
    ++live;
    if (t.slot < 0 || static_cast<size_t>(t.slot) >= slots_.size()) {
      violation("ticket of window %zu names slot %d", w, t.slot);
      continue;
    }
    ++scratch_[static_cast<size_t>(t.slot)];
    const Slot& s = slots_[static_cast<size_t>(t.slot)];
    if (s.phase != SlotPhase::Loading) violation("ticket of window %zu targets slot %d in %s", w, t.slot, to_string(s.phase));
    if (s.generation != t.generation || s.object != t.object)
      violation("ticket of window %zu (object %u gen %llu) disagrees with slot %d (object %u gen %llu)", w, t.object,
                static_cast<unsigned long long>(t.generation), t.slot, s.object,
                static_cast<unsigned long long>(s.generation));
    if (t.epoch > epoch_ || (t.epoch != epoch_ && !s.abandoned))
      violation("ticket of window %zu has epoch %llu (current %llu) on a live version", w,
                static_cast<unsigned long long>(t.epoch), static_cast<unsigned long long>(epoch_));
    if (s.bundle != static_cast<int32_t>(t.bundle))
      violation("ticket of window %zu and slot %d name different bundles", w, t.slot);
    const PlanObject& o = m_.object(t.object);
    if (t.piece < o.first_piece || t.piece >= o.first_piece + o.pieces)
      violation("ticket of window %zu carries piece %u outside object %u", w, t.piece, t.object);
    if ((windows_[w] == WindowPhase::HostReady || windows_[w] == WindowPhase::Copying) && !t.host)
      violation("window %zu is %s without host bytes", w, to_string(windows_[w]));
  }
  return live;
}

// A published slot: every byte of its object landed, no movement left, consumer counts that
// fit its phase.
void Plan::check_published_locked(size_t i, const Slot& s, const PlanObject* o) {
  if (s.pending || s.bundle != -1 || s.abandoned) violation("published slot %zu still has movement", i);
  if (!o || s.landed != o->logical_bytes || s.pieces_copied != o->pieces)
    violation("published slot %zu holds %llu bytes, its object %llu", i, static_cast<unsigned long long>(s.landed),
              static_cast<unsigned long long>(o ? o->logical_bytes : 0));
  if (s.phase == SlotPhase::DeviceReady && (s.acquired || s.consumers)) violation("slot %zu is DEVICE_READY but acquired", i);
  if (cfg_.open_consumers) {
    if (s.phase == SlotPhase::InUse && s.consumers == 0) violation("slot %zu is IN_USE without a live consumer", i);
    if (s.phase == SlotPhase::Recyclable && s.consumers)
      violation("slot %zu is RECYCLABLE with %u live consumer(s)", i, s.consumers);
    return;
  }
  if (s.phase == SlotPhase::InUse &&
      (s.finished + s.consumers != s.acquired || s.acquired > cfg_.consumers ||
       (s.consumers == 0 && s.finished >= cfg_.consumers)))
    violation("slot %zu IN_USE consumer counts disagree (acquired %u, live %u, finished %u)", i, s.acquired, s.consumers,
              s.finished);
  if (s.phase == SlotPhase::Recyclable && (s.consumers || s.finished != cfg_.consumers))
    violation("slot %zu is RECYCLABLE before its consumers finished", i);
}

// Every slot's phase against its movement and consumers. Returns the live consumers.
uint64_t Plan::check_slots_locked() {
  uint64_t consumers = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    consumers += s.consumers;
    if (scratch_[i] != s.pending) violation("slot %zu counts %u pending reads, %u tickets target it", i, s.pending, scratch_[i]);
    const PlanObject* o = s.object < m_.object_count() ? &m_.object(s.object) : nullptr;
    const bool open = cfg_.open_consumers;
    switch (s.phase) {
      case SlotPhase::Vacant:
        if (s.pending || (s.consumers && !open) || s.bundle != -1) violation("slot %zu is VACANT but holds work", i);
        break;
      case SlotPhase::Loading:
        if ((s.consumers && !open) || s.acquired) violation("slot %zu is LOADING with consumers", i);
        if (s.bundle < 0 || !bundles_[static_cast<size_t>(s.bundle)].live)
          violation("slot %zu is LOADING without a live bundle", i);
        if (!o || s.pieces_issued > o->pieces || s.pieces_copied > s.pieces_issued || s.landed > o->logical_bytes)
          violation("slot %zu movement counts are out of range", i);
        if (!s.abandoned && s.pieces_issued != s.pieces_copied + s.pending)
          violation("slot %zu lost a read: issued %u, copied %u, pending %u", i, s.pieces_issued, s.pieces_copied, s.pending);
        break;
      case SlotPhase::DeviceReady:
      case SlotPhase::InUse:
      case SlotPhase::Recyclable: check_published_locked(i, s, o); break;
    }
  }
  return consumers;
}

// Every live bundle holds LOADING slots of the current epoch (unless it failed).
void Plan::check_bundles_locked() {
  for (size_t bi = 0; bi < bundles_.size(); ++bi) {
    const Bundle& b = bundles_[bi];
    if (!b.live) continue;
    uint32_t bound = 0;
    for (int32_t si : b.slots) {
      const Slot& s = slots_[static_cast<size_t>(si)];
      if (s.bundle != static_cast<int32_t>(bi)) continue;
      ++bound;
      if (!b.failed && (s.phase != SlotPhase::Loading || s.abandoned || b.epoch != epoch_))
        violation("live bundle %zu has slot %d in %s", bi, si, to_string(s.phase));
    }
    if (bound == 0) violation("live bundle %zu holds no slot", bi);
  }
}

bool Plan::check_locked() {
  ++c_.reconcile_checks;
  check_ok_ = true;
  const uint32_t live = check_tickets_locked();
  const uint64_t consumers = check_slots_locked();
  if (consumers != c_.consumer_acquires - c_.consumer_releases)
    violation("live consumers %llu != acquires - releases %llu", static_cast<unsigned long long>(consumers),
              static_cast<unsigned long long>(c_.consumer_acquires - c_.consumer_releases));
  if (c_.tickets_issued != c_.tickets_retired + live)
    violation("tickets issued %llu != retired %llu + live %u", static_cast<unsigned long long>(c_.tickets_issued),
              static_cast<unsigned long long>(c_.tickets_retired), live);
  if (published_failed_ != 0) violation("a failed bundle was published");
  check_bundles_locked();
  if (!check_ok_) ++c_.reconcile_violations;
  return check_ok_;
}

}  // namespace resid
