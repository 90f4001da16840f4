#include "drivers/stream/stream_layout.hpp"

#include <algorithm>
#include <string>

#include "core/errors.hpp"

namespace resid {

uint64_t StreamLayout::step_of_read(uint64_t k) const {
  return static_cast<uint64_t>(std::upper_bound(step_first_read.begin(), step_first_read.end(), k) -
                               step_first_read.begin()) - 1;
}

uint64_t StreamLayout::bundle_steps(uint64_t b) const { return std::min<uint64_t>(bundle, steps - b * bundle); }

uint32_t StreamLayout::piece_of_read(const PlanManifest& m, uint64_t k) const {
  const uint64_t s = step_of_read(k);
  return m.object(step_object[s]).first_piece + static_cast<uint32_t>(k - step_first_read[s]);
}

StreamLayout make_stream_layout(const PlanManifest& m, const std::vector<uint32_t>& order, uint32_t passes,
                                uint32_t bundle) {
  StreamLayout lay;
  lay.bundle = bundle;
  lay.steps = static_cast<uint64_t>(passes) * order.size();
  lay.step_object.resize(lay.steps);
  lay.step_first_read.resize(lay.steps + 1, 0);
  for (uint64_t s = 0; s < lay.steps; ++s) {
    lay.step_object[s] = order[s % order.size()];
    lay.step_first_read[s + 1] = lay.step_first_read[s] + m.object(lay.step_object[s]).pieces;
  }
  lay.bundles = (lay.steps + bundle - 1) / bundle;
  return lay;
}

namespace {

// The read the wrong-object cell hits delivers the bytes of the run's first read: a
// wrong-object rejection only when that is another object's.
bool wrong_object_applies(const StreamLayout& lay, const PlanManifest& m, uint64_t k) {
  return m.piece(lay.piece_of_read(m, k)).object != m.piece(lay.piece_of_read(m, 0)).object;
}

// The first bundle of two or more reads whose last read is at or after `at`.
bool has_multi_read_bundle(const StreamLayout& lay, uint64_t at) {
  for (uint64_t b = 0; b < lay.bundles; ++b) {
    const uint64_t first = lay.step_first_read[lay.bundle_first_step(b)];
    const uint64_t last = lay.step_first_read[lay.bundle_first_step(b) + lay.bundle_steps(b)] - 1;
    if (last > first && last >= at) return true;
  }
  return false;
}

}  // namespace

void check_stream_fault(const StreamConfig& cfg, const StreamLayout& lay, const PlanManifest& m, uint32_t windows,
                        uint32_t depth) {
  const FaultSpec& f = cfg.fault;
  const uint64_t total = lay.total_reads(), at = f.at;
  auto need = [&](bool ok, const std::string& why) {
    if (!ok) throw InputError("--fault " + to_string(f) + ": " + why);
  };
  const std::string below = "N must be below the " + std::to_string(total) + " reads";
  switch (f.cell) {
    case FaultCell::None:
    case FaultCell::ShutdownLiveConsumer: break;
    case FaultCell::ShortRead:
    case FaultCell::Eio:
    case FaultCell::Stall:
    case FaultCell::ResetOutstanding: need(at < total, below); break;
    case FaultCell::WrongObject:
      need(at < total, below);
      need(wrong_object_applies(lay, m, at), "read " + std::to_string(at) +
                                                 " is of the object the first read is of: its bytes would be its own");
      break;
    case FaultCell::StaleCompletion:
      need(at < total && total > windows, "needs a read at or after N on a window used before (more reads than windows)");
      break;
    case FaultCell::OutOfOrder:
      need(depth >= 2, "needs --depth >= 2");
      need(at + depth < total, "N + depth must be below the " + std::to_string(total) + " reads");
      break;
    case FaultCell::HeldConsumer:
      need(at + cfg.slots + cfg.bundle <= lay.steps, "N (a step) + --slots + --bundle must not exceed the " +
                                                         std::to_string(lay.steps) + " steps, so the producer needs the held slot");
      break;
    case FaultCell::BundleExtentFailure:
      need(has_multi_read_bundle(lay, at), "needs a bundle of two or more reads ending at or after N (use --bundle 2 "
                                           "or multi-extent objects)");
      break;
    case FaultCell::RecycleLive:
      throw InputError("--fault recycle-live does not apply to stream (a cell of generate); stream's cells are " +
                       fault_cell_names());
  }
}

}  // namespace resid
