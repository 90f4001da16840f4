// `residctl stream`'s producer: requests the declared bundles from the Plan, lowest first, as
// slots come free, and moves them through the one fill path (plan/fill.hpp) into the slot
// arena, copying each read as it is accepted (a slot is invisible until its bundle is
// published). It carries out the driver cells held-consumer (reuse of a held slot must be
// refused) and reset-outstanding (a reset with reads in flight); the source cells happen in
// the fault decorator underneath.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "drivers/stream/stream_consumer.hpp"
#include "plan/fill.hpp"

namespace resid {

// What the driver cells did.
struct StreamCellLog {
  bool fired = false;
  int64_t read = -1;                  // reset-outstanding: the read after which it reset
  uint32_t reset_outstanding = 0;     // reads in flight at the reset
  PlanError held_refusal = PlanError::None;
  PlanError shutdown_refusal = PlanError::None;
};

class StreamProducer final : private FillOwner {
 public:
  StreamProducer(Source& src, Plan& plan, StreamShared& sh, const StreamLayout& lay, const StreamConfig& cfg);

  // Until every bundle is published, or the run fails (failing), or nothing moves for the
  // watchdog's time.
  void run();
  // After a failure: drain, hand every completion to the Plan, abandon what never comes,
  // stop the consumers.
  void fail_closed();

  bool failing = false;
  PlanError fail_kind = PlanError::None;  // the first fatal rejection
  std::string fail_source_error;          // that completion's own message
  const char* internal = nullptr;         // a failure that is not a rejection
  PlanError internal_kind = PlanError::None;
  bool watchdog = false;
  uint32_t abandoned = 0;
  StreamCellLog cell;

  const FillPath& fill() const { return fill_; }
  // Per bundle: 0 pending, 1 requested, 2 published.
  const std::vector<uint8_t>& bundle_states() const { return bstate_; }

 private:
  bool request_bundles();
  void try_held_reuse();
  bool issue_reads();
  void do_reset(uint64_t read);
  void publish(uint32_t fill);
  void fail_internal(const char* what, PlanError e);

  bool copy(uint32_t fill, const CopyOrder& order, const Completion& c, uint64_t submit_ns) override;
  void on_landed(uint32_t fill) override { publish(fill); }
  void on_rejected(uint32_t fill, PlanError kind, const Completion& c) override;
  void on_dropped(uint32_t) override {}
  void on_internal(uint32_t, const char* what, PlanError e) override { fail_internal(what, e); }

  Plan& plan_;
  StreamShared& sh_;
  const StreamLayout& lay_;
  const StreamConfig& cfg_;
  FillPath fill_;
  std::vector<uint8_t> bstate_;
  std::vector<uint64_t> bundle_of_fill_;  // fill index -> bundle index
  uint32_t requested_ = 0;                // bundles requested and not yet published
  std::vector<uint32_t> objs_;
  std::vector<uint64_t> tags_;
  uint64_t low_ = 0;                      // the lowest bundle not yet published
  bool reset_fired_ = false;
};

}  // namespace resid
