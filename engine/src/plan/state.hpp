// The Plan's mutable half (reference 004 §2.3, §3.3-3.4): host windows, slots of stable
// addresses, request epochs, slot generations, tickets and consumer counts, with the two
// lifecycles kept separate:
//
//   window:  FREE -> READING -> HOST_READY -> COPYING -> FREE
//   slot:    VACANT -> LOADING -> DEVICE_READY -> IN_USE -> RECYCLABLE -> VACANT
//
// plus the invalidation edges the protocol needs: a rejected or invalidated read returns its
// window READING/HOST_READY -> FREE without a copy, and an abandoned (failed, reset or shut
// down) version goes LOADING/DEVICE_READY/RECYCLABLE -> VACANT without ever being published
// or, once published, without a consumer. Nothing else is a transition: every other request
// returns an explicit PlanError and changes nothing.
//
// The reuse invariants, as enforced here:
//  - no publication before the movement completes: publish() needs every piece of every
//    object of the bundle read, accepted and copied, and the landed bytes equal to the
//    object's logical bytes; a bundle publishes all-or-nothing in one transition;
//  - a published version denotes the requested object and generation: a completion is
//    accepted only if its ticket is the live one for its window, is of the current epoch,
//    names the slot's object and generation, and carries exactly the piece it asked for;
//    a consumer acquires a version by its request tag and object, and releases it by
//    generation;
//  - no reuse before consumers finish: a slot becomes RECYCLABLE only when every declared
//    consumer released it, and recycle() refuses anything else;
//  - reset advances the epoch and invalidates every unpublished version (in-flight reads
//    come back StaleEpoch and are retired, never copied);
//  - shutdown refuses while source operations are submitted or consumers are live;
//  - an invalid completion (stale epoch/generation, wrong object or extent, short read,
//    I/O error, extent overflow) never makes data visible: the ticket is retired, the
//    window freed without a copy, and (except StaleEpoch, which is an expected consequence
//    of reset) the bundle fails and can never publish.
//
// Tickets: one per window, since a read in flight holds exactly one window. A ticket tag is
// (serial << 32 | window); the serial advances with every read, so a late duplicate of an
// earlier completion on the same window is told from the live one. The tag travels through
// the source (io_uring: the SQE's user_data points at the engine's preallocated op record,
// which carries the tag) and back with the completion.
//
// Open consumers (PlanConfig::open_consumers; the pager, where a slot is one chunk of the
// region): versions are not declared to a fixed set of consumers. A consumer holds a slot
// (hold/unhold) in any phase, before its version is published too (a step enters its chunks
// before their faults fill them); publication of a held slot goes on to IN_USE, the last
// unhold of a published slot makes it RECYCLABLE, a hold of a RECYCLABLE (cached) version
// makes it IN_USE again (reuse of the same generation), and recycle() takes a RECYCLABLE or
// a never-held DEVICE_READY version (published ahead, evicted unused) to VACANT. A slot
// with a live consumer is never recycled (ConsumersLive): that is the pager's eviction
// rule, enforced here. Slots are requested by index (request_slots), since a chunk's slot
// is its stable address.
//
// Thread safety: every method locks one mutex; the producer (requests, reads, copies,
// publication, recycling, reset, shutdown) and the consumers (acquire, release) may call
// concurrently. Nothing here allocates after construction.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "plan/manifest.hpp"
#include "source/source.hpp"
#include "source/window.hpp"

namespace resid {

enum class SlotPhase : uint8_t { Vacant, Loading, DeviceReady, InUse, Recyclable };
const char* to_string(SlotPhase p);

enum class PlanError : uint8_t {
  None,
  InvalidTransition,  // a resource is not in the state the operation needs
  InvalidArgument,    // out-of-range index, empty or oversized bundle, stale bundle handle
  NoFreeSlot,         // request: fewer VACANT slots than the bundle needs
  UnknownTicket,      // completion tag names no window
  StaleEpoch,         // completion of a read submitted before a reset: invalidated
  StaleGeneration,    // completion or consumer ticket of a version that is no longer current
  WrongObject,        // completion carries bytes of another object
  WrongExtent,        // completion is not the extent its ticket asked for
  WindowMismatch,     // completion landed in another window than its ticket holds
  ShortRead,          // source rejections, by reason
  ReadFailed,
  ExtentOutsideFile,
  ExtentTooLarge,
  SizeMismatch,       // publication: landed bytes differ from the object's logical bytes
  ContentMismatch,    // the bytes read are not the extent's content (its digest differs)
  BundleFailed,       // the bundle failed earlier: this completion is dropped
  BundleIncomplete,   // publish before every movement completed
  NotPublished,       // acquire: no published version for that request tag
  ConsumersLive,      // recycle/shutdown refused: consumers hold a version
  NotConsumed,        // recycle refused: not every declared consumer has finished
  OutstandingReads,   // shutdown refused: source operations still submitted
  ShutDown,           // the plan is shut down
  Count
};
const char* to_string(PlanError e);
// Does a completion rejected with `e` fail its bundle (everything but StaleEpoch)?
bool is_fatal_rejection(PlanError e);

template <class T>
struct [[nodiscard]] PlanResult {
  PlanError error = PlanError::None;
  T value{};
  bool ok() const { return error == PlanError::None; }
};

using BundleHandle = uint64_t;  // serial << 32 | index

struct ConsumerTicket {
  int32_t slot = -1;
  uint32_t object = 0;
  uint64_t generation = 0;
  uint64_t epoch = 0;
  uint64_t tag = 0;
  const std::byte* data = nullptr;  // the slot's stable address
};

struct CopyOrder {
  std::byte* dst = nullptr;
  const std::byte* src = nullptr;
  uint64_t bytes = 0;
  uint32_t piece = 0;
};

struct CompleteVerdict {
  bool accepted = false;        // window is HOST_READY; copy next
  BundleHandle bundle = 0;      // the ticket's bundle
  uint32_t object = 0;
  uint32_t piece = 0;
  int32_t slot = -1;
};

struct EndCopyVerdict {
  bool bundle_complete = false;  // every piece of every object of the bundle copied
  BundleHandle bundle = 0;
};

// The first rejection, in fixed fields (formatted after the read path).
struct RejectionRecord {
  PlanError kind = PlanError::None;
  uint64_t tag = 0;
  int32_t window = -1;
  int32_t slot = -1;
  uint32_t object = 0;
  uint32_t piece = 0;
  uint64_t generation = 0;
  uint64_t epoch = 0;
  uint64_t claimed_offset = 0;  // what the completion carried
  uint64_t claimed_length = 0;
  uint32_t claimed_object = UINT32_MAX;  // for WrongObject: whose bytes these are
};

struct PlanCounters {
  uint64_t transitions = 0;           // successful state changes
  uint64_t requests = 0;              // bundles requested
  uint64_t bundles_published = 0;
  uint64_t objects_published = 0;
  uint64_t bytes_published = 0;       // logical
  uint64_t bundles_failed = 0;
  uint64_t bundles_invalidated = 0;   // by reset or shutdown
  uint64_t tickets_issued = 0;
  uint64_t tickets_retired = 0;       // = copied + rejected + invalidated + abandoned
  uint64_t tickets_copied = 0;
  uint64_t tickets_rejected = 0;      // fatal rejections + drops of a failed bundle's reads
  uint64_t tickets_invalidated = 0;   // StaleEpoch after a reset
  uint64_t tickets_abandoned = 0;     // retired by abandon_tickets() after a source drain
  uint64_t completions_refused = 0;   // completions matching no live ticket (no state change)
  uint64_t consumer_acquires = 0;
  uint64_t consumer_releases = 0;
  uint64_t recycles = 0;
  uint64_t recycle_refusals = 0;
  uint64_t shutdown_refusals = 0;
  uint64_t resets = 0;
  uint64_t versions_discarded = 0;    // published versions vacated unconsumed (shutdown)
  uint64_t recycled_unconsumed = 0;   // open consumers: DEVICE_READY versions recycled never held
  uint64_t reconcile_checks = 0;
  uint64_t reconcile_violations = 0;
  std::array<uint64_t, static_cast<size_t>(PlanError::Count)> errors{};  // every non-ok result
};

struct PlanBalance {
  bool tickets_balanced = false;    // issued == retired and none live
  uint32_t live_tickets = 0;
  uint32_t windows_free = 0;
  uint32_t windows = 0;
  uint32_t slots_vacant = 0;
  uint32_t slots = 0;
  bool consumers_balanced = false;  // acquires == releases and no live consumer
  bool shut_down = false;
  bool balanced() const {
    return tickets_balanced && windows_free == windows && slots_vacant == slots && consumers_balanced;
  }
};

struct PlanConfig {
  uint32_t windows = 1;
  std::vector<std::byte*> slot_addresses;  // one stable address per slot
  uint64_t slot_bytes = 0;                 // capacity of each slot
  uint32_t consumers = 1;                  // declared consumers of every version
  uint32_t max_bundle = 1;                 // most objects one request may bundle
  bool eager_reconcile = false;            // check every invariant after every transition
  bool open_consumers = false;             // hold/unhold in any phase (the pager; header)
};

class Plan {
 public:
  Plan(const PlanManifest& manifest, PlanConfig cfg);
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  const PlanManifest& manifest() const { return m_; }
  uint32_t window_count() const { return static_cast<uint32_t>(windows_.size()); }
  uint32_t slot_count() const { return static_cast<uint32_t>(slots_.size()); }

  // ---- producer ----------------------------------------------------------------------
  // Reserve VACANT slots (lowest first) for `n` objects as one bundle: VACANT -> LOADING,
  // each slot's generation advances. `tags` are the request tags consumers acquire by.
  PlanResult<BundleHandle> request(const uint32_t* objects, const uint64_t* tags, uint32_t n);
  // The same for the given slots (each must be VACANT: else InvalidTransition, nothing
  // changes): the pager's chunk c is slot c.
  PlanResult<BundleHandle> request_slots(const int32_t* slots, const uint32_t* objects, const uint64_t* tags,
                                         uint32_t n);
  // Slot of the i-th object of a live bundle.
  PlanResult<int32_t> bundle_slot(BundleHandle b, uint32_t i) const;
  // Issue the ticket for the next unissued piece of `slot` into FREE window `window`:
  // window FREE -> READING. Returns the tag to submit with. Pieces are issued in order.
  PlanResult<uint64_t> begin_read(BundleHandle b, int32_t slot, uint32_t piece, int32_t window);
  // Validate a source completion against its ticket; READING -> HOST_READY if valid, else
  // the ticket is retired and the window freed (see the header comment).
  PlanResult<CompleteVerdict> complete_read(const Completion& c);
  // HOST_READY -> COPYING: where to copy the accepted bytes.
  PlanResult<CopyOrder> begin_copy(uint64_t tag);
  // COPYING -> FREE, the bytes are in the slot; retires the ticket.
  PlanResult<EndCopyVerdict> end_copy(uint64_t tag);
  // LOADING -> DEVICE_READY for every slot of the bundle, in one transition.
  PlanError publish(BundleHandle b);
  // RECYCLABLE -> VACANT (refused with ConsumersLive / NotConsumed before consumers finish).
  PlanError recycle(int32_t slot);
  // Recycles every RECYCLABLE slot; returns how many.
  uint32_t recycle_ready();
  // Advance the epoch; every unpublished version is invalidated. Returns the number of
  // source operations outstanding at the reset (their completions come back StaleEpoch).
  PlanResult<uint32_t> reset();
  // After the caller drained its source: retire tickets whose completion will never come
  // (an interrupted read of a failed run). Returns how many.
  uint32_t abandon_tickets();
  // Refused (OutstandingReads / ConsumersLive) until no read is submitted and no consumer
  // holds a version; then every slot is vacated and the plan refuses further work.
  PlanError shutdown();

  // ---- consumers -----------------------------------------------------------------------
  // DEVICE_READY/IN_USE -> IN_USE for the published version with request tag `tag`, which
  // must be of `object`. NotPublished when no such version is visible (yet).
  PlanResult<ConsumerTicket> acquire(uint64_t tag, uint32_t object);
  // One declared consumer finished: the last one makes the slot RECYCLABLE.
  PlanError release(const ConsumerTicket& t);
  // Open consumers (header): a consumer holds / lets go of `slot`, in any phase.
  PlanError hold(int32_t slot);
  PlanError unhold(int32_t slot);

  // ---- observation ----------------------------------------------------------------------
  // Every successful transition advances the version; waiters wake on a change.
  uint64_t version() const;
  // Wait until version() != seen or the deadline passes; returns the version.
  uint64_t wait_change(uint64_t seen, std::chrono::steady_clock::time_point deadline) const;
  void notify_all() const { cv_.notify_all(); }
  PlanCounters counters() const;
  PlanBalance balance() const;
  RejectionRecord first_rejection() const;
  // The first invariant violation eager reconcile found ("" if none); formatting happens
  // when asked, never on the read path.
  std::string first_violation() const;
  uint64_t epoch() const;
  WindowPhase window_phase(int32_t w) const;
  SlotPhase slot_phase(int32_t s) const;
  uint64_t slot_generation(int32_t s) const;
  uint32_t slot_consumers(int32_t s) const;
  uint32_t slots_vacant() const;
  uint32_t live_tickets() const;
  // Runs the invariant check now (counts like an eager check); true when it holds.
  bool reconcile();
  // Every slot's phase and live consumers, into caller-owned arrays of slot_count() entries
  // (no allocation; the pager compares them with its books).
  void slot_states(SlotPhase* phases, uint32_t* consumers) const;

 private:
  friend struct PlanTestAccess;

  struct Ticket {
    uint32_t serial = 0;
    bool live = false;
    uint32_t object = 0;
    uint32_t piece = 0;
    uint64_t generation = 0;
    uint64_t epoch = 0;
    int32_t slot = -1;
    uint32_t bundle = 0;  // bundle index
    const std::byte* host = nullptr;
  };
  struct Slot {
    SlotPhase phase = SlotPhase::Vacant;
    std::byte* addr = nullptr;
    uint64_t generation = 0;
    uint64_t epoch = 0;
    uint32_t object = 0;
    uint64_t tag = 0;
    int32_t bundle = -1;
    bool abandoned = false;  // vacate once its last ticket retires; never publish
    uint32_t pieces_issued = 0;
    uint32_t pieces_copied = 0;
    uint32_t pending = 0;    // live tickets targeting this slot
    uint64_t landed = 0;
    uint32_t consumers = 0;  // live
    uint32_t acquired = 0;
    uint32_t finished = 0;
  };
  struct Bundle {
    bool live = false;
    bool failed = false;
    uint32_t serial = 0;
    uint64_t epoch = 0;
    uint32_t count = 0;
    std::vector<int32_t> slots;  // capacity max_bundle, reserved at construction
  };

  PlanError fail(PlanError e);  // counts an error result (lock held)
  void transitioned(bool wake = true);  // version, counters, eager check, wake waiters (lock held)
  void retire(Ticket& t, int32_t window);
  void vacate(Slot& s, int32_t index);
  PlanResult<BundleHandle> start_bundle(uint32_t bi, const int32_t* slots, const uint32_t* objects,
                                        const uint64_t* tags, uint32_t n);  // lock held, checked
  void maybe_free_bundle(uint32_t b);
  void fail_bundle(uint32_t b);
  void invalidate_bundle(uint32_t b);
  void reject(PlanError kind, const Ticket& t, int32_t window, const Completion& c, uint32_t claimed_object);
  Bundle* bundle_of(BundleHandle h);
  const Bundle* bundle_of(BundleHandle h) const;
  bool check_locked();
  // Its parts (lock held).
  void violation(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  uint32_t check_tickets_locked();
  uint64_t check_slots_locked();
  void check_published_locked(size_t i, const Slot& s, const PlanObject* o);
  void check_bundles_locked();

  const PlanManifest& m_;
  PlanConfig cfg_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t version_ = 0;
  uint64_t epoch_ = 1;
  bool shut_down_ = false;
  std::vector<WindowPhase> windows_;
  std::vector<Ticket> tickets_;  // one per window
  std::vector<Slot> slots_;
  std::vector<Bundle> bundles_;
  std::vector<int32_t> scratch_slots_;  // request()'s choice of vacant slots (lock held)
  PlanCounters c_;
  RejectionRecord first_rejection_;
  char first_violation_[256] = {0};
  bool check_ok_ = true;           // the check in progress found nothing yet
  uint64_t published_failed_ = 0;  // publications of a failed bundle: must stay 0
  std::vector<uint32_t> scratch_;  // per-slot ticket counts for the check
};

}  // namespace resid
