#include "drivers/stream/stream.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <thread>

#include "core/checksum.hpp"
#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/fsutil.hpp"
#include "core/run_record.hpp"
#include "drivers/stream/stream_input.hpp"
#include "drivers/stream/stream_run.hpp"
#include "drivers/stream/stream_verify.hpp"
#include "source/window.hpp"

namespace resid {

namespace {

// ---- input (InputError: exit 2, nothing written) --------------------------------------------

void check_flags(const StreamConfig& cfg) {
  if (cfg.out.empty()) throw InputError("--out is required");
  if (cfg.manifest.empty() == !cfg.object_bytes) throw InputError("give exactly one of --manifest and --object-bytes");
  check_source_flags(cfg.source, cfg.windows, cfg.depth);
  if (cfg.source != SourceEngine::Uring && cfg.register_buffers)
    throw InputError("--register-buffers needs --source uring");
  if (cfg.window_bytes == 0 || cfg.window_bytes % 4096 != 0)
    throw InputError("--window-bytes must be a positive multiple of 4096");
  if (cfg.slots == 0 || cfg.consumers == 0 || cfg.passes == 0 || cfg.bundle == 0)
    throw InputError("--slots, --consumers, --passes and --bundle must be positive");
  if (cfg.bundle > cfg.slots)
    throw InputError("--bundle " + std::to_string(cfg.bundle) + " exceeds --slots " + std::to_string(cfg.slots));
  if (!(cfg.watchdog_s > 0)) throw InputError("--watchdog-s must be positive");
}

void open_input(StreamRun& r) {
  const StreamConfig& cfg = r.cfg;
  SourceOptions so = source_options(cfg.source, cfg.windows, cfg.depth);
  so.register_buffers = cfg.register_buffers;
  r.windows = static_cast<uint32_t>(so.windows);
  r.depth = static_cast<uint32_t>(so.depth);
  FaultySourceHandle fs = with_fault(open_source(cfg.source, cfg.file, cfg.window_bytes, so), cfg.fault);
  r.src = std::move(fs.source);
  r.fault_report = std::move(fs.report);
  if (r.src->engine() != cfg.source) throw std::logic_error("the source engine that opened is not the one asked for");
  StreamObjects in = cfg.object_bytes ? tile_objects(r.src->file_size(), *cfg.object_bytes)
                                      : load_objects_json(cfg.manifest, r.src->file_size());
  std::map<std::string, uint32_t> index;
  for (uint32_t i = 0; i < in.objects.size(); ++i) index[in.objects[i].name] = i;
  for (const auto& n : in.order) {
    auto it = index.find(n);
    if (it == index.end()) throw InputError("manifest: step order names unknown object '" + n + "'");
    r.order.push_back(it->second);
  }
  r.manifest.emplace(PlanManifest::build(std::move(in.objects), r.src->file_size(), r.src->alignment(),
                                         r.src->window_capacity()));
  if (r.order.empty())
    for (uint32_t i = 0; i < r.m().object_count(); ++i) r.order.push_back(i);
  r.lay = make_stream_layout(r.m(), r.order, cfg.passes, cfg.bundle);
  if (cfg.fault.active())
    check_stream_fault(cfg, r.lay, r.m(), r.windows, r.depth);
}

// ---- set-up: reference checksums, arena, Plan, consumers' state, producer --------------------

void set_up(StreamRun& r) {
  const StreamConfig& cfg = r.cfg;
  std::vector<bool> needed(r.m().object_count(), false);
  for (uint32_t o : r.order) needed[o] = true;
  const uint64_t ref0 = now_ns();
  r.ref = cfg.pattern_seed ? pattern_checksums(r.m(), needed, *cfg.pattern_seed) : file_checksums(cfg.file, r.m(), needed);
  r.close.reference_ns = now_ns() - ref0;
  r.slot_bytes = r.m().slot_bytes_needed();
  r.arena_bytes = r.slot_bytes * cfg.slots;
  r.arena = alloc_aligned_buffer(r.arena_bytes);
  PlanConfig pc;
  pc.windows = static_cast<uint32_t>(r.src->window_count());
  for (uint32_t i = 0; i < cfg.slots; ++i) pc.slot_addresses.push_back(r.arena + static_cast<uint64_t>(i) * r.slot_bytes);
  pc.slot_bytes = r.slot_bytes;
  pc.consumers = cfg.consumers;
  pc.max_bundle = cfg.bundle;
  pc.eager_reconcile = cfg.eager_reconcile;
  r.plan.emplace(r.m(), pc);
  r.shared.emplace(r.m(), *r.plan, r.lay, r.ref, cfg);
  r.producer.emplace(*r.src, *r.plan, *r.shared, r.lay, cfg);
}

// shutdown-live-consumer: shut down while consumer 0 holds the last version. The Plan must refuse.
void shutdown_under_consumer(StreamRun& r) {
  StreamShared& sh = *r.shared;
  const uint64_t h0 = now_ns();
  while (!sh.holding.load() && !sh.held_done.load() && !sh.stop.load() && now_ns() - h0 < sh.watchdog_ns())
    r.plan->wait_change(r.plan->version(), std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
  if (sh.holding.load()) {
    r.producer->cell.shutdown_refusal = r.plan->shutdown();
    r.producer->cell.fired = true;
  }
  sh.refused.store(true);
  r.plan->notify_all();
}

// ---- the stream ------------------------------------------------------------------------------

void stream(StreamRun& r) {
  r.close.alloc0 = alloc_counts();
  const uint64_t t0 = now_ns();
  std::vector<std::thread> consumers;
  consumers.reserve(r.cfg.consumers);
  for (uint32_t i = 0; i < r.cfg.consumers; ++i) consumers.emplace_back(consume, std::ref(*r.shared), i);
  try {
    r.producer->run();
    if (r.producer->failing)
      r.producer->fail_closed();
    else if (r.cfg.fault.cell == FaultCell::ShutdownLiveConsumer)
      shutdown_under_consumer(r);
  } catch (const std::exception& e) {
    r.close.exception_error = e.what();
    r.shared->halt();
  }
  for (auto& th : consumers) th.join();
  r.close.wall_ns = now_ns() - t0;
  r.close.alloc1 = alloc_counts();
}

void close_run(StreamRun& r) {
  StreamClose& c = r.close;
  if (!c.exception_error.empty()) {
    try {
      r.producer->fail_closed();
    } catch (const std::exception&) {
    }
  }
  r.plan->recycle_ready();
  c.shutdown_error = r.plan->shutdown();
  if (r.cfg.eager_reconcile) r.plan->reconcile();
  c.counters = r.plan->counters();
  c.balance = r.plan->balance();
  c.source = r.src->stats();
  c.source_windows_free = r.src->windows_free();
  c.source_inflight = r.src->inflight();
  c.rejection = r.plan->first_rejection();
  for (uint64_t s = 0; s < r.lay.steps; ++s) {
    if (r.shared->step_done[s].load() != r.cfg.consumers) continue;
    ++c.steps_consumed;
    c.digest = digest_fold(c.digest, r.shared->step_sum[s].load());
  }
}

}  // namespace

int run_stream(const StreamConfig& cfg) {
  check_flags(cfg);
  StreamRun r(cfg);
  open_input(r);
  make_dirs(cfg.out);
  set_up(r);
  stream(r);
  close_run(r);
  std::string error = r.error();
  const nlohmann::json fault = stream_fault_json(r, error);
  write_run_dir(cfg.out, std::nullopt, stream_record(r, error, fault));
  if (!error.empty()) {
    std::fprintf(stderr, "residctl: run failed: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace resid
