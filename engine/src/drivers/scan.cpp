#include "drivers/scan.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "adapters/synthetic/pattern.hpp"
#include "adapters/synthetic/region.hpp"
#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/fsutil.hpp"
#include "core/mincore.hpp"
#include "core/proc_io.hpp"
#include "core/run_record.hpp"
#include "drivers/pager_arm.hpp"
#include "drivers/record.hpp"
#include "pager/pager.hpp"
#include "pager/record.hpp"
#include "pager/trace.hpp"
#include "policy/policy.hpp"

namespace resid {

const char* to_string(SignalKind s) {
  return s == SignalKind::AllThreadsFinished ? "all-threads-finished" : "thread0-started";
}

std::optional<SignalKind> parse_signal(std::string_view s) {
  for (SignalKind k : {SignalKind::AllThreadsFinished, SignalKind::Thread0Started})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

namespace {

constexpr uint64_t kPage = 4096;

// The compute phase: burn CPU (not sleep), as a matmul would.
void busy_work(uint64_t us) {
  if (us == 0) return;
  const uint64_t end = now_ns() + us * 1000;
  volatile uint64_t sink = 0;
  while (now_ns() < end)
    for (uint64_t i = 0; i < 256; ++i) sink = sink + i * 2654435761u;
}

nlohmann::json config_json(const ScanConfig& c) {
  return {{"region", c.region},
          {"seed", c.seed},
          {"out", c.out},
          {"arm", to_string(c.arm)},
          {"budget_bytes", c.budget_bytes ? nlohmann::json(*c.budget_bytes) : nlohmann::json(nullptr)},
          {"chunk_size", c.chunk_size},
          {"passes", c.passes},
          {"threads", c.threads},
          {"compute_us", c.compute_us},
          {"signal", to_string(c.signal)},
          {"source", to_string(c.source)},
          {"windows", source_options(c.source, c.windows, c.depth).windows},
          {"depth", source_options(c.source, c.windows, c.depth).depth},
          {"prefetch_depth", c.prefetch_depth},
          {"eager_reconcile", c.eager_reconcile},
          {"watchdog_s", c.watchdog_s},
          {"calibrate", c.calibrate}};
}

// State shared by the driver threads of one walk.
struct Walk {
  explicit Walk(const ScanConfig& c) : cfg(c) {}
  const ScanConfig& cfg;
  uint64_t file_bytes = 0;
  uint32_t chunks = 0;
  uint64_t steps = 0;
  const std::byte* base = nullptr;
  Pager* pager = nullptr;  // null for kernel-mmap
  Trace* trace = nullptr;

  // Written only inside the barrier completion (one thread at a time, ordered by it).
  uint64_t step = 0;
  uint64_t accesses = 0, misses = 0;
  bool next_miss = false;  // kernel-mmap: mincore verdict for the step about to run
  std::vector<unsigned char> mincore_buf;
  std::atomic<bool> stop{false};
  std::string stop_reason;

  std::atomic<uint64_t> bytes_verified{0}, bad_words{0};
  std::mutex err_mu;
  std::optional<VerifyMismatch> first_bad;
  uint64_t first_bad_step = 0;

  uint64_t chunk_len(uint32_t c) const {
    return std::min<uint64_t>(cfg.chunk_size, file_bytes - static_cast<uint64_t>(c) * cfg.chunk_size);
  }

  // Arm A's miss test, just before a step: any page of the chunk not in the page cache.
  void probe_kernel_miss(uint64_t s) {
    const uint32_t c = static_cast<uint32_t>(s % chunks);
    const PageCount pc = count_resident(base + static_cast<uint64_t>(c) * cfg.chunk_size, chunk_len(c), mincore_buf);
    next_miss = !pc.ok || pc.present < pc.pages;
  }

  // Barrier completion for step `step`: record the access, deliver the consumption
  // signal, move every observer to the next step, decide whether to go on.
  void end_of_step() {
    const uint64_t s = step;
    const uint32_t c = static_cast<uint32_t>(s % chunks);
    bool miss;
    if (pager) {
      miss = pager->demand_filled_in(c, s);
      if (cfg.signal == SignalKind::AllThreadsFinished)
        pager->step_boundary(s, s + 1);
      else
        pager->set_step(s + 1);
    } else {
      miss = next_miss;
    }
    ++accesses;
    misses += miss ? 1 : 0;
    trace->append(s, c, TraceKind::Access, miss ? kTraceMiss : 0);
    step = s + 1;
    if (bad_words.load() > 0) {
      stop = true;
      stop_reason = "verify";
    }
    // Startup audit: after the first pass every declared chunk must have been signalled.
    if (pager && s + 1 == chunks && !stop) {
      const auto zero = pager->audit().zero_signal_chunks();
      if (!zero.empty()) {
        stop = true;
        stop_reason = "signal audit: " + std::to_string(zero.size()) +
                      " declared chunk(s) received no consumption signal in the first pass (first: " +
                      std::to_string(zero.front()) + ")";
      }
    }
    if (!pager && step < steps && !stop) probe_kernel_miss(step);
  }

  template <class Barrier>
  void drive(uint32_t t, Barrier& bar) {
    for (uint64_t s = 0; s < steps; ++s) {
      const uint32_t c = static_cast<uint32_t>(s % chunks);
      if (pager && t == 0 && cfg.signal == SignalKind::Thread0Started) pager->signal(s);
      if (pager) pager->enter(c);
      const uint64_t off0 = static_cast<uint64_t>(c) * cfg.chunk_size;
      const uint64_t pages = chunk_len(c) / kPage;
      uint64_t verified = 0;
      for (uint64_t p = t; p < pages; p += cfg.threads) {
        const uint64_t off = off0 + p * kPage;
        const VerifyResult r = verify_pattern(base + off, off, kPage, cfg.seed);
        verified += kPage;
        if (r.bad_words) {
          bad_words += r.bad_words;
          std::lock_guard lk(err_mu);
          if (!first_bad || r.first->offset < first_bad->offset) {
            first_bad = r.first;
            first_bad_step = s;
          }
        }
      }
      bytes_verified += verified;
      busy_work(cfg.compute_us);
      if (pager) pager->leave(c);
      bar.arrive_and_wait();
      if (stop.load()) break;
    }
  }
};

}  // namespace

uint64_t min_budget_chunks(const ScanConfig& cfg) {
  return static_cast<uint64_t>(cfg.threads) + 1 +
         (cfg.arm == Arm::PagerPrefetch ? cfg.prefetch_depth : 0);
}

int run_scan(const ScanConfig& cfg) {
  // ---- validate everything before anything is written (exit 2 otherwise) ------------
  if (cfg.chunk_size == 0 || cfg.chunk_size % kPage != 0)
    throw InputError("--chunk-size " + std::to_string(cfg.chunk_size) + " is not a positive multiple of 4096");
  if (cfg.passes == 0) throw InputError("--passes must be at least 1");
  if (cfg.threads == 0 || cfg.threads > 1024) throw InputError("--threads must be in 1..1024");
  if (!(cfg.watchdog_s > 0)) throw InputError("--watchdog-s must be positive");
  if (cfg.arm == Arm::PagerPrefetch && cfg.prefetch_depth == 0)
    throw InputError("--prefetch-depth must be at least 1 for pager-prefetch");
  check_source_flags(cfg.source, cfg.windows, cfg.depth);
  check_pager_fault(cfg.fault, cfg.arm, cfg.source, "scan");
  const uint64_t file_bytes = region_size(cfg.region);
  const uint64_t chunks = (file_bytes + cfg.chunk_size - 1) / cfg.chunk_size;
  if (chunks > UINT32_MAX) throw InputError("too many chunks");
  const uint64_t walk_steps = static_cast<uint64_t>(cfg.passes) * chunks;
  if (walk_steps > UINT32_MAX) throw InputError("passes * chunks exceeds the trace's u32 step field");
  const uint64_t steps = cfg.calibrate ? 0 : walk_steps;

  const auto policy_kind = policy_of(cfg.arm);
  std::unique_ptr<Pager> pager;
  uint64_t window_bytes = 0;
  uint64_t page_table_bytes = 0;
  std::optional<uint64_t> budget_chunks;
  std::shared_ptr<const FaultReport> fault_report;
  // Sized from the walk even when calibrating, so the calibration run holds the same
  // bookkeeping memory as the real run (it is part of the measured overhead O).
  const size_t reserve =
      static_cast<size_t>(walk_steps) * (policy_kind ? 4 + cfg.prefetch_depth : 1) + 64;
  Trace trace(reserve);
  int map_fd = -1;
  const std::byte* base = nullptr;

  if (policy_kind) {
    if (!cfg.budget_bytes) throw InputError("--budget-bytes is required for arm " + std::string(to_string(cfg.arm)));
    FaultySourceHandle fs =
        with_fault(open_source(cfg.source, cfg.region, cfg.chunk_size, source_options(cfg.source, cfg.windows, cfg.depth)),
                   cfg.fault);
    auto source = std::move(fs.source);
    fault_report = std::move(fs.report);
    window_bytes = source->window_bytes();
    // The pager pays for its own memory out of the weight budget: its windows, and the
    // page-table pages that map its region (they stay charged after MADV_DONTNEED).
    page_table_bytes = Pager::page_table_reserve(chunks * cfg.chunk_size);
    const uint64_t own = window_bytes + page_table_bytes;
    if (*cfg.budget_bytes < own)
      throw InputError("--budget-bytes " + std::to_string(*cfg.budget_bytes) +
                       " does not even cover the pager's window and page tables (" + std::to_string(own) + " bytes)");
    budget_chunks = (*cfg.budget_bytes - own) / cfg.chunk_size;
    const uint64_t need = min_budget_chunks(cfg);
    if (*budget_chunks < need)
      throw InputError("--budget-bytes " + std::to_string(*cfg.budget_bytes) + " leaves " +
                       std::to_string(*budget_chunks) + " chunk(s) after the pager's own " +
                       std::to_string(own) + " bytes; " + to_string(cfg.arm) + " with " +
                       std::to_string(cfg.threads) + " thread(s) needs at least " + std::to_string(need) +
                       " (--budget-bytes >= " + std::to_string(need * cfg.chunk_size + own) + ")");
    PagerConfig pc;
    pc.chunk_size = cfg.chunk_size;
    pc.budget_chunks = *budget_chunks;
    // A calibration run touches no weight byte, so it must not prefetch one either.
    pc.prefetch_depth = cfg.arm == Arm::PagerPrefetch && !cfg.calibrate ? cfg.prefetch_depth : 0;
    pc.eager_reconcile = cfg.eager_reconcile;
    pc.watchdog_s = cfg.watchdog_s;
    // F: chunk s+1 is read while step s is walked.
    pc.readahead = cfg.source == SourceEngine::Uring && !cfg.calibrate;
    pager = std::make_unique<Pager>(std::move(source), make_policy(*policy_kind, static_cast<uint32_t>(chunks)), pc,
                                    &trace);
    base = pager->base();
  } else {
    map_fd = ::open(cfg.region.c_str(), O_RDONLY | O_CLOEXEC);
    if (map_fd < 0) throw InputError("cannot open region " + cfg.region + " (" + errno_name(errno) + ")");
    void* p = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, map_fd, 0);
    if (p == MAP_FAILED) throw InputError("cannot mmap region " + cfg.region + " (" + errno_name(errno) + ")");
    base = static_cast<const std::byte*>(p);
    if (cfg.budget_bytes) budget_chunks = *cfg.budget_bytes / cfg.chunk_size;
  }
  try {
    make_dirs(cfg.out);
  } catch (const RunError& e) {
    throw InputError(std::string("--out: ") + e.what());
  }

  // ---- the walk ----------------------------------------------------------------------
  Walk walk(cfg);
  walk.file_bytes = file_bytes;
  walk.chunks = static_cast<uint32_t>(chunks);
  walk.steps = steps;
  walk.base = base;
  walk.pager = pager.get();
  walk.trace = &trace;

  if (!pager && !cfg.calibrate) {
    // Arm A starts cold: drop the file's clean pages so the first pass reads from storage.
    ::posix_fadvise(map_fd, 0, 0, POSIX_FADV_DONTNEED);
    walk.probe_kernel_miss(0);
  }

  std::mutex done_mu;
  std::condition_variable done_cv;
  uint32_t finished = 0;
  bool pager_failed = false;
  // Sampled before the pager starts: arm E may prefetch before the first driver runs.
  const uint64_t io0 = proc_read_bytes().value_or(0);
  if (pager) {
    pager->set_failure_callback([&] {
      std::lock_guard lk(done_mu);
      pager_failed = true;
      done_cv.notify_all();
    });
    pager->set_step(0);
    if (steps > 0) pager->set_readahead_horizon(steps - 1);
    pager->start();
  }

  const uint64_t t0 = now_ns();
  auto on_step = [&walk]() noexcept {
    if (walk.steps) walk.end_of_step();
  };
  std::barrier bar(cfg.threads, on_step);
  uint64_t io_end = io0;
  std::vector<std::thread> drivers;
  drivers.reserve(cfg.threads);
  for (uint32_t t = 0; t < cfg.threads; ++t) {
    drivers.emplace_back([&, t] {
      if (cfg.calibrate)
        bar.arrive_and_wait();  // threads exist and meet once; no region byte is touched
      else
        walk.drive(t, bar);
      std::lock_guard lk(done_mu);
      ++finished;
      done_cv.notify_all();
    });
  }

  auto base_record = [&](bool ok, const std::string& error) {
    nlohmann::json j = pager_run_head("scan", ok, error, to_string(cfg.arm), policy_kind, pager.get());
    j["signal"] = to_string(cfg.signal);
    j["config"] = config_json(cfg);
    j["region"] = {{"path", cfg.region}, {"bytes", file_bytes}, {"chunk_size", cfg.chunk_size}, {"chunks", chunks}};
    j["budget"] = {{"budget_bytes", cfg.budget_bytes ? nlohmann::json(*cfg.budget_bytes) : nlohmann::json(nullptr)},
                   {"window_bytes", window_bytes},
                   {"page_table_bytes", page_table_bytes},
                   {"budget_chunks", budget_chunks ? nlohmann::json(*budget_chunks) : nlohmann::json(nullptr)}};
    const PagerStats ps = pager ? pager->stats() : PagerStats{};
    const SourceStats ss = pager ? pager->source_stats() : SourceStats{};
    j["counters"] = {{"steps", walk.accesses},
                     {"accesses", walk.accesses},
                     {"hits", walk.accesses - walk.misses},
                     {"misses", walk.misses},
                     {"demand_fills", ps.demand_fills},
                     {"prefetch_fills", ps.prefetch_fills},
                     {"prefetch_used", ps.prefetch_used},
                     {"evictions", ps.evictions},
                     {"faults_handled", ps.faults_handled},
                     {"spurious_faults", ps.spurious_faults},
                     {"signals", ps.signals},
                     {"logical_bytes_read", ss.logical_bytes},
                     {"physical_bytes_read", io_end - io0},
                     {"bytes_verified", walk.bytes_verified.load()},
                     {"verify_errors", walk.bad_words.load()},
                     {"max_resident_chunks", ps.max_resident_chunks},
                     {"reconcile_checks", ps.reconcile_checks},
                     {"reconcile_mismatches", ps.reconcile_mismatches},
                     {"exposed_source_wait_ns", ps.exposed_wait_ns},
                     {"waited_faults", ps.waited_faults}};
    j["latency_ns"] = {{"fault_p50", ps.fault_p50_ns}, {"fault_p99", ps.fault_p99_ns},
                       {"fault_max", ps.fault_max_ns}, {"fill_p50", ps.fill_p50_ns},
                       {"fill_p99", ps.fill_p99_ns}};
    j["source_stats"] = pager_source_json(pager.get());
    j["plan"] = pager_plan_json(pager.get());
    j["readahead"] = pager_readahead_json(pager.get());
    j["fault"] = fault_json(cfg.fault, fault_report.get());
    j["rejection"] = pager_rejection_json(pager.get());
    j["wall_ns"] = now_ns() - t0;
    j["trace"] = {{"file", "trace.bin"}, {"records", trace.size()}};
    return j;
  };

  {
    std::unique_lock lk(done_mu);
    // The pager watches its own queue; a fill stuck in storage is watched from here.
    while (!done_cv.wait_for(lk, std::chrono::milliseconds(100),
                             [&] { return finished == cfg.threads || pager_failed; })) {
      if (pager) {
        lk.unlock();
        pager->check_stall();
        lk.lock();
      }
    }
    if (pager_failed && finished < cfg.threads) {
      // Drivers are blocked in faults the pager cannot serve: report and leave without
      // joining them (never a hang). The process exits; the kernel reaps the waiters.
      lk.unlock();
      io_end = proc_read_bytes().value_or(io0);
      const std::string err = "pager: " + pager->error();
      auto j = base_record(false, err);
      write_run_dir(cfg.out, trace.serialize(cfg.chunk_size, chunks), j);
      std::fprintf(stderr, "residctl: run failed: %s\n", err.c_str());
      std::fflush(nullptr);
      std::_Exit(1);
    }
  }
  for (auto& th : drivers) th.join();
  const uint64_t wall = now_ns() - t0;
  io_end = proc_read_bytes().value_or(io0);
  if (pager) pager->shutdown();

  // ---- verdict -----------------------------------------------------------------------
  std::string error;
  if (walk.first_bad) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "verify: byte at offset %llu is 0x%02x, expected 0x%02x (chunk %llu, step %llu)",
                  static_cast<unsigned long long>(walk.first_bad->offset), walk.first_bad->actual,
                  walk.first_bad->expected,
                  static_cast<unsigned long long>(walk.first_bad->offset / cfg.chunk_size),
                  static_cast<unsigned long long>(walk.first_bad_step));
    error = buf;
  } else if (!walk.stop_reason.empty()) {
    error = walk.stop_reason;
  } else if (pager && pager->failed()) {
    error = "pager: " + pager->error();
  } else if (pager && pager->stats().reconcile_mismatches > 0) {
    error = "reconcile: " + std::to_string(pager->stats().reconcile_mismatches) +
            " mismatch(es) between the pager's books and mincore; first: " + pager->first_mismatch();
  } else if (pager && !cfg.calibrate && pager->audit().out_of_order() > 0) {
    error = "signal audit: " + std::to_string(pager->audit().out_of_order()) + " consumption signal(s) out of step order";
  } else if (pager) {
    error = pager_close_error(*pager);
  }
  if (error.empty() && fault_report && !cfg.calibrate) {
    // A fatal cell or a stall must fail the run; a recoverable one must fire.
    const std::string cell = to_string(cfg.fault.cell);
    if (!fault_report->fired)
      error = "fault " + cell + " did not fire (no eligible point at or after " + std::to_string(cfg.fault.at) + ")";
    else if (cfg.fault.cell != FaultCell::OutOfOrder)
      error = "fault " + cell + " fired but the run did not fail";
  }
  auto j = base_record(error.empty(), error);
  j["wall_ns"] = wall;
  write_run_dir(cfg.out, trace.serialize(cfg.chunk_size, chunks), j);
  if (!pager && base) ::munmap(const_cast<std::byte*>(base), file_bytes);
  if (map_fd >= 0) ::close(map_fd);
  if (!error.empty()) {
    std::fprintf(stderr, "residctl: run failed: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace resid
