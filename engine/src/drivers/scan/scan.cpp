#include "drivers/scan/scan.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "adapters/synthetic/region.hpp"
#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/fsutil.hpp"
#include "core/proc_io.hpp"
#include "core/run_record.hpp"
#include "policy/declared.hpp"

namespace resid {

namespace {

// One scan: the region and what reads it (the pager, or arm A's file mapping), its trace.
struct ScanRun {
  explicit ScanRun(const ScanConfig& c) : cfg(c), a(c.pager) {}
  const ScanConfig& cfg;
  const PagerArmConfig& a;
  uint64_t file_bytes = 0, chunks = 0, walk_steps = 0, steps = 0;
  PagerBudget budget;
  std::optional<uint64_t> budget_chunks;
  std::shared_ptr<const FaultReport> fault;
  std::unique_ptr<Trace> trace;
  std::unique_ptr<Pager> pager;
  int map_fd = -1;
  const std::byte* base = nullptr;
  uint64_t io0 = 0, t0 = 0;

  ~ScanRun() {
    if (!pager && base) ::munmap(const_cast<std::byte*>(base), file_bytes);
    if (map_fd >= 0) ::close(map_fd);
  }
};

// ---- input (InputError: exit 2, nothing written) --------------------------------------------

void check_input(ScanRun& r) {
  const ScanConfig& cfg = r.cfg;
  check_pager_arm(cfg.pager, 1024, "scan");
  if (cfg.passes == 0) throw InputError("--passes must be at least 1");
  r.file_bytes = region_size(cfg.region);
  r.chunks = (r.file_bytes + r.a.chunk_size - 1) / r.a.chunk_size;
  if (r.chunks > UINT32_MAX) throw InputError("too many chunks");
  r.walk_steps = static_cast<uint64_t>(cfg.passes) * r.chunks;
  if (r.walk_steps > UINT32_MAX) throw InputError("passes * chunks exceeds the trace's u32 step field");
  r.steps = r.a.calibrate ? 0 : r.walk_steps;
  // Sized from the walk even when calibrating, so the calibration run holds the same
  // bookkeeping memory as the real run (it is part of the measured overhead O).
  const bool paged = policy_of(r.a.arm).has_value();
  r.trace = std::make_unique<Trace>(static_cast<size_t>(r.walk_steps) * (paged ? 4 + r.a.prefetch_depth : 1) + 64);
}

// Every driver thread may hold one chunk and one more must be fillable (threads + 1); arm E
// also keeps its prefetch horizon (+ prefetch depth) so it does not evict its own prefetches.
void open_pager(ScanRun& r) {
  const PagerArmConfig& a = r.a;
  FaultySourceHandle fs = open_pager_source(a, r.cfg.region);
  r.fault = fs.report;
  const uint64_t depth = a.arm == Arm::PagerPrefetch ? a.prefetch_depth : 0;
  r.budget = pager_budget(a, *fs.source, r.chunks, a.threads + 1 + depth, 0,
                          std::to_string(a.threads) + " thread(s) + 1" + (depth ? " + " + std::to_string(depth) + " prefetch depth" : ""));
  r.budget_chunks = r.budget.budget_chunks;
  PagerConfig pc = base_pager_config(a, r.budget.budget_chunks, r.file_bytes);
  // A driver thread ahead of the others (--sync none) has its faults decided at the cursor
  // of its own step, not the slowest thread's (pager.hpp); in lockstep no fault is ahead.
  pc.defer_ahead_faults = true;
  // The cyclic scan: step s is chunk s mod N (step_chunks empty).
  auto policy = make_policy(*policy_of(a.arm), static_cast<uint32_t>(r.chunks));
  r.pager = std::make_unique<Pager>(std::move(fs.source), std::move(policy), pc, r.trace.get());
  r.base = r.pager->base();
}

void open_mapping(ScanRun& r) {
  r.map_fd = ::open(r.cfg.region.c_str(), O_RDONLY | O_CLOEXEC);
  if (r.map_fd < 0) throw InputError("cannot open region " + r.cfg.region + " (" + errno_name(errno) + ")");
  void* p = ::mmap(nullptr, r.file_bytes, PROT_READ, MAP_SHARED, r.map_fd, 0);
  if (p == MAP_FAILED) throw InputError("cannot mmap region " + r.cfg.region + " (" + errno_name(errno) + ")");
  r.base = static_cast<const std::byte*>(p);
  if (r.a.budget_bytes) r.budget_chunks = *r.a.budget_bytes / r.a.chunk_size;
}

// ---- run.json --------------------------------------------------------------------------------

nlohmann::json record(const ScanRun& r, const Walk& walk, const std::string& error, uint64_t io_end, uint64_t wall) {
  const ScanConfig& cfg = r.cfg;
  const Pager* p = r.pager.get();
  nlohmann::json j = pager_run_head("scan", error, r.a, p);
  j["signal"] = to_string(cfg.signal);
  j["config"] = pager_config_json(r.a);
  j["config"].update({{"region", cfg.region}, {"seed", cfg.seed}, {"passes", cfg.passes}, {"compute_us", cfg.compute_us},
                      {"signal", to_string(cfg.signal)}, {"sync", to_string(cfg.sync)}, {"jitter_us", cfg.jitter_us},
                      {"jitter_seed", cfg.jitter_seed}});
  j["region"] = {{"path", cfg.region}, {"bytes", r.file_bytes}, {"chunk_size", r.a.chunk_size}, {"chunks", r.chunks}};
  j["budget"] = pager_budget_json(r.a, r.budget, r.budget_chunks);
  const AccessCounts ac{walk.accesses(), walk.accesses(), walk.misses(), p ? p->stats().signals : 0, io_end - r.io0};
  j["counters"] = pager_counters_json(ac, p);
  j["counters"].update({{"bytes_verified", walk.bytes_verified()}, {"verify_errors", walk.bad_words()}});
  j["latency_ns"] = pager_latency_json(p);
  add_pager_sections(j, p, r.a, r.fault.get());
  j["wall_ns"] = wall;
  j["trace"] = {{"file", "trace.bin"}, {"records", r.trace->size()}};
  return j;
}

int finish(const ScanRun& r, const Walk& walk, const std::string& error, uint64_t io_end, uint64_t wall) {
  write_run_dir(r.a.out, r.trace->serialize(r.a.chunk_size, r.chunks), record(r, walk, error, io_end, wall));
  if (error.empty()) return 0;
  std::fprintf(stderr, "residctl: run failed: %s\n", error.c_str());
  return 1;
}

// The drivers' threads over the walk (calibration: they exist and meet once, touching no
// region byte).
std::vector<std::thread> start_drivers(const ScanRun& r, Walk& walk, std::barrier<std::function<void()>>& bar,
                                       RunMonitor& mon, std::atomic<uint32_t>& finished) {
  std::vector<std::thread> drivers;
  drivers.reserve(r.a.threads);
  for (uint32_t t = 0; t < r.a.threads; ++t)
    drivers.emplace_back([&, t] {
      if (r.a.calibrate)
        bar.arrive_and_wait();
      else if (r.cfg.sync == SyncMode::None)
        walk.drive_free(t);
      else
        walk.drive(t, bar);
      if (++finished == r.a.threads) mon.workload_done();
    });
  return drivers;
}

}  // namespace

int run_scan(const ScanConfig& cfg) {
  ScanRun r(cfg);
  check_input(r);
  if (policy_of(r.a.arm))
    open_pager(r);
  else
    open_mapping(r);
  try {
    make_dirs(r.a.out);
  } catch (const RunError& e) {
    throw InputError(std::string("--out: ") + e.what());
  }
  const WalkConfig wc{r.a.chunk_size, r.a.threads, cfg.seed, cfg.compute_us, cfg.signal, cfg.sync, cfg.jitter_us,
                      cfg.jitter_seed};
  Walk walk(wc, r.file_bytes, r.steps, r.base, r.pager.get(), *r.trace);
  if (!r.pager && !r.a.calibrate) {
    // Arm A starts cold: drop the file's clean pages so the first pass reads from storage.
    ::posix_fadvise(r.map_fd, 0, 0, POSIX_FADV_DONTNEED);
    walk.start_kernel_mapping();
  }
  RunMonitor mon;
  r.io0 = proc_read_bytes().value_or(0);  // before the pager starts: arm E may prefetch at once
  if (r.pager) {
    r.pager->set_failure_callback([&mon] { mon.pager_failed(); });
    r.pager->set_step(0);
    if (r.steps > 0) r.pager->set_readahead_horizon(r.steps - 1);
    r.pager->start();
  }
  r.t0 = now_ns();
  std::barrier<std::function<void()>> bar(r.a.threads, [&walk] { walk.end_of_step(); });
  std::atomic<uint32_t> finished{0};
  std::vector<std::thread> drivers = start_drivers(r, walk, bar, mon, finished);
  if (std::string why = mon.watch(r.pager.get(), {}, std::chrono::milliseconds(0)); !why.empty()) {
    // Drivers are blocked in faults the pager cannot serve: report and leave without joining
    // them (never a hang). The process exits; the kernel reaps the waiters.
    finish(r, walk, why, proc_read_bytes().value_or(r.io0), now_ns() - r.t0);
    std::fflush(nullptr);
    std::_Exit(1);
  }
  for (auto& th : drivers) th.join();
  const uint64_t wall = now_ns() - r.t0, io_end = proc_read_bytes().value_or(r.io0);
  if (r.pager) r.pager->shutdown();
  PagerVerdict v;
  v.workload = walk.error();
  if (r.pager && !r.a.calibrate && r.pager->audit().out_of_order() > 0)
    v.audit = "signal audit: " + std::to_string(r.pager->audit().out_of_order()) + " consumption signal(s) out of step order";
  return finish(r, walk, pager_verdict(r.pager.get(), v, r.a, r.fault.get()), io_end, wall);
}

}  // namespace resid
