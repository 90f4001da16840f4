// One `residctl stream` run: its inputs, the pieces it runs (source, Plan, consumers,
// producer), what it left at the close, and its verdict. run_stream (stream.cpp) drives it;
// stream_record.cpp writes its run.json.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/alloc_count.hpp"
#include "drivers/stream/stream.hpp"
#include "drivers/stream/stream_layout.hpp"
#include "drivers/stream/stream_producer.hpp"
#include "plan/manifest.hpp"
#include "plan/state.hpp"

namespace resid {

// What the run left, read after the stream ended.
struct StreamClose {
  PlanError shutdown_error = PlanError::None;
  PlanCounters counters;
  PlanBalance balance;
  SourceStats source;
  uint64_t source_windows_free = 0, source_inflight = 0;
  RejectionRecord rejection;
  uint64_t steps_consumed = 0, digest = 0;
  uint64_t wall_ns = 0, reference_ns = 0;
  AllocCounts alloc0, alloc1;
  std::string exception_error;  // something escaped the stream
};

struct StreamRun {
  explicit StreamRun(const StreamConfig& c) : cfg(c) {}
  const StreamConfig& cfg;
  uint32_t windows = 0, depth = 0;
  std::unique_ptr<Source> src;
  std::shared_ptr<const FaultReport> fault_report;  // a source cell's decorator
  std::optional<PlanManifest> manifest;
  std::vector<uint32_t> order;
  StreamLayout lay;
  std::vector<uint64_t> ref;
  uint64_t slot_bytes = 0, arena_bytes = 0;
  std::byte* arena = nullptr;
  std::optional<Plan> plan;
  std::optional<StreamShared> shared;
  std::optional<StreamProducer> producer;
  StreamClose close;

  ~StreamRun();
  const PlanManifest& m() const { return *manifest; }
  std::string object_name(uint32_t o) const;
  // The bundle the faulted read belonged to (fatal source cells; -1 when none).
  int64_t faulted_bundle() const;
  // The first rejection, in words ("" when none).
  std::string rejection_text() const;
  // Why the run failed ("" when it did not).
  std::string error() const;
  bool balanced() const;
};

// run.json's sections (stream_record.cpp). `error`: the run's verdict ("" = ok).
nlohmann::json stream_fault_json(const StreamRun& r, std::string& error);
nlohmann::json stream_record(const StreamRun& r, const std::string& error, const nlohmann::json& fault);

}  // namespace resid
