// `generate`'s driver cells (reference 004 §5.4, Table 7; source/fault.hpp): the driver, not
// the source decorator, carries them out, through the pager's consumers and its Plan.
//   held-consumer@N          at the end of the first object step >= N whose chunks were held
//                            (and whose next step leaves room for one more consumer), the
//                            driver keeps one more consumer on one of its resident chunks
//                            through the next step, asking the Plan to reuse it at each step
//                            boundary meanwhile: the Plan must refuse (consumers-live) every
//                            time; then the consumer is released.
//   reset-outstanding@N      carried out by the pager thread (pager/reset.cpp): the Plan is
//                            reset with reads in flight once read N was submitted.
//   shutdown-live-consumer   after the last token, with one consumer held on a resident
//                            chunk, the Plan is asked to shut down: it must refuse
//                            (consumers-live); the consumer is released and the real
//                            shutdown follows (N is not used).
// All three are recoverable: the tokens and logits must equal the run without the cell.
#include <algorithm>

#include "core/run_record.hpp"
#include "drivers/generate/generate_run.hpp"

namespace resid {

namespace {
constexpr uint64_t kHeldSteps = 1;  // held-consumer: steps held beyond the chunk's own
}

// Before the consumed step `old` lets go of its chunks (so none of them is unheld for an
// instant): take the extra consumer on a resident chunk of it that `next` does not hold.
void GenerateRun::hold_for_cell(uint32_t old, uint64_t consumed, const std::vector<ChunkId>& next, bool next_oversize) {
  if (a_.fault.cell != FaultCell::HeldConsumer || held_.fired || !pager_ || consumed < a_.fault.at) return;
  // The next step must still run with one more chunk held, or its faults could find no
  // victim: a held step must fit beside it; an oversize one needs one chunk above the hard
  // minimum (every compute thread's pins, one chunk to fill, one of slack).
  const uint64_t need = next_oversize ? uint64_t{Pager::kPinsPerThread} * a_.threads + 3 : next.size() + 1;
  if (need > fit_chunks_) return;
  for (ChunkId c : access_chunks(old)) {
    if (!pager_->resident(c) || std::find(next.begin(), next.end(), c) != next.end()) continue;
    pager_->enter(c);
    held_.fired = true;
    held_.chunk = c;
    held_.step = consumed;
    held_.until = consumed + kHeldSteps;
    return;
  }
}

// After the step's own consumers left: the pager could reuse the held chunk now; ask the Plan
// to, as an eviction would, and count its refusals. Released once held through `until`.
void GenerateRun::ask_held_reuse(uint64_t consumed) {
  if (!held_.fired || held_.released) return;
  if (consumed > held_.step) ++held_.held_steps;
  const PlanError e = pager_->try_recycle(held_.chunk);
  ++held_.attempts;
  if (e == PlanError::ConsumersLive)
    ++held_.refusals;
  else if (e == PlanError::None)
    held_.recycled = true;
  else
    held_.other = e;
  if (consumed >= held_.until) release_held();
}

void GenerateRun::release_held() {
  if (!held_.fired || held_.released || !pager_) return;
  pager_->leave(held_.chunk);
  held_.released = true;
}

void GenerateRun::probe_shutdown() {
  if (a_.fault.cell != FaultCell::ShutdownLiveConsumer || !pager_ || !run_error_.empty()) return;
  const std::vector<ChunkId> rs = pager_->resident_set();
  if (rs.empty()) return;
  shut_cell_.chunk = rs.front();
  pager_->enter(shut_cell_.chunk);
  shut_cell_.answer = pager_->try_plan_shutdown();
  shut_cell_.fired = true;
  pager_->leave(shut_cell_.chunk);
}

// Why a driver cell did not behave ("" when it did, or when none was asked for).
std::string GenerateRun::driver_cell_error() const {
  if (!pager_ || a_.calibrate) return {};
  const std::string cell = to_string(a_.fault.cell);
  const std::string not_fired = "fault " + cell + " did not fire (no eligible point at or after " +
                                std::to_string(a_.fault.at) + ")";
  switch (a_.fault.cell) {
    case FaultCell::HeldConsumer: {
      const std::string chunk = "chunk " + std::to_string(held_.chunk);
      if (!held_.fired) return not_fired;
      if (held_.recycled) return "fault held-consumer: the Plan recycled " + chunk + " while the driver held a consumer on it";
      if (held_.refusals == 0)
        return "fault held-consumer: no reuse of " + chunk + " was refused (the Plan answered " + to_string(held_.other) + ")";
      if (!held_.released) return "fault held-consumer: the consumer on " + chunk + " was never released";
      return {};
    }
    case FaultCell::ShutdownLiveConsumer:
      if (!shut_cell_.fired) return "fault shutdown-live-consumer did not fire (no resident chunk to hold after the last token)";
      if (shut_cell_.answer != PlanError::ConsumersLive)
        return std::string("fault shutdown-live-consumer: the Plan answered ") + to_string(shut_cell_.answer) +
               " to a shutdown under a live consumer on chunk " + std::to_string(shut_cell_.chunk);
      return {};
    case FaultCell::ResetOutstanding: {
      const PagerResetStats r = pager_->stats().reset;
      if (!r.cell_fired) return not_fired;
      if (r.cell_outstanding == 0) return "fault reset-outstanding: the reset found no outstanding source work";
      if (r.stale_published != 0)
        return "fault reset-outstanding: " + std::to_string(r.stale_published) + " bundle(s) of the old epoch were published";
      return {};
    }
    default: return {};
  }
}

// run.json `fault`: what the driver cell did (docs/run-contract.md).
void GenerateRun::add_driver_cell_json(nlohmann::json& f) const {
  if (!pager_) return;
  switch (a_.fault.cell) {
    case FaultCell::HeldConsumer:
      f["fired"] = held_.fired;
      f["held_chunk"] = held_.fired ? nlohmann::json(held_.chunk) : nlohmann::json(nullptr);
      f["held_step"] = held_.fired ? nlohmann::json(held_.step) : nlohmann::json(nullptr);
      f["held_steps"] = held_.held_steps;
      f["reuse_attempts"] = held_.attempts;
      f["reuse_refusals"] = held_.refusals;  // the Plan's consumers-live answers
      f["released"] = held_.released;
      break;
    case FaultCell::ResetOutstanding: {
      const PagerResetStats r = pager_->stats().reset;
      const PlanCounters pc = pager_->plan().counters();
      f["fired"] = r.cell_fired;
      f["read"] = r.cell_fired ? nlohmann::json(r.cell_read) : nlohmann::json(nullptr);
      f["outstanding_at_reset"] = r.cell_outstanding;
      // Reads the reset invalidated: completions that came back StaleEpoch and landed reads
      // retired in their windows, never copied (the Plan's count).
      f["discarded"] = pc.tickets_invalidated;
      f["bundles_forgotten"] = r.bundles_forgotten;
      f["stale_published"] = r.stale_published;  // bundles of the old epoch published (counted at publication)
      break;
    }
    case FaultCell::ShutdownLiveConsumer:
      f["fired"] = shut_cell_.fired;
      f["held_chunk"] = shut_cell_.fired ? nlohmann::json(shut_cell_.chunk) : nlohmann::json(nullptr);
      f["shutdown_refusal"] =
          shut_cell_.fired && shut_cell_.answer != PlanError::None ? nlohmann::json(to_string(shut_cell_.answer)) : nlohmann::json(nullptr);
      break;
    default: break;
  }
}

}  // namespace resid
