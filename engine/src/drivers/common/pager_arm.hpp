// The pager-arm driver layer `scan` and `generate` share (docs/run-contract.md, "Budget"):
// their common flags, the checks of those flags, the budget arithmetic, the PagerConfig,
// the source (with its fault decorator), the main thread's watch over the run, the verdict
// chain and the run-record sections both write.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "drivers/common/arm.hpp"
#include "pager/pager.hpp"
#include "source/fault.hpp"
#include "source/source.hpp"

namespace resid {

// The pager thread's nice value unless --pager-nice says otherwise: above the compute threads
// (nice 0), so a fault's service is not queued behind them or behind other work on a loaded
// machine (docs/run-contract.md, "--pager-nice"; `make bench` measures it beside a CPU load).
inline constexpr int kDefaultPagerNice = -10;

// The flags every pager-arm subcommand takes.
struct PagerArmConfig {
  std::string out;
  Arm arm = Arm::PagerDeclared;
  std::optional<uint64_t> budget_bytes;
  uint64_t chunk_size = 2u << 20;
  uint32_t threads = 1;  // driver (scan) or compute (generate) threads
  SourceEngine source = SourceEngine::Direct;
  std::optional<uint32_t> windows;  // default 8 for uring, 1 for the blocking engines
  std::optional<uint32_t> depth;    // default windows
  uint32_t prefetch_depth = 2;
  uint32_t readahead_steps = 0;  // --readahead-steps (uring): steps read ahead, 0 = as the windows reach
  bool eager_reconcile = false;
  double watchdog_s = 60;
  bool calibrate = false;  // set everything up, touch no weight byte
  FaultSpec fault;         // --fault CELL[@N]
  std::string content_digests;  // --content-digests: `residctl inventory`'s file ("" = no check)
  bool protect = false;         // --protect: the region is mlocked on fault (pager.hpp)
  uint32_t lru_k = 0;           // --lru-k (generate's pager-lru-k): chunks each layer keeps; 0: not given
  std::optional<int> pager_nice = kDefaultPagerNice;  // --pager-nice; nullopt: `inherit` (the process's)
};

// The flags' own checks (InputError naming the flag): chunk size, threads in 1..max_threads,
// watchdog, prefetch depth for pager-prefetch, --lru-k exactly with pager-lru-k (an arm only
// generate takes: the synthetic scan has no layers), windows and depth, the fault cell.
void check_pager_arm(const PagerArmConfig& c, uint32_t max_threads, const char* subcommand);

// The driver cells generate carries out itself (held-consumer, reset-outstanding,
// shutdown-live-consumer, recycle-live).
bool is_generate_driver_fault(FaultCell f);

// The cells a pager-arm subcommand takes (InputError naming the cell and the ones that do
// apply otherwise): every source cell on a pager arm, bundle-extent-failure only with the
// uring source's read-ahead bundles, the driver cells only in generate.
void check_pager_fault(const FaultSpec& spec, Arm arm, SourceEngine source, const char* subcommand);

// The source of a pager arm, wrapped by the fault decorator when --fault names a source cell.
FaultySourceHandle open_pager_source(const PagerArmConfig& c, const std::string& path);

// The weight-residency budget of a pager arm: every window and the page-table reserve are
// paid from it, then `reserve_chunks` (generate's MADV_COLLAPSE page); what is left must hold
// `min_chunks`. InputError naming the smallest accepted --budget-bytes otherwise.
struct PagerBudget {
  uint64_t window_bytes = 0, page_table_bytes = 0;
  uint64_t budget_chunks = 0, min_chunks = 0, reserve_chunks = 0;
  uint64_t own_bytes() const { return window_bytes + page_table_bytes; }
};
PagerBudget pager_budget(const PagerArmConfig& c, const Source& src, uint64_t chunks, uint64_t min_chunks,
                         uint64_t reserve_chunks, const std::string& why_min);

// What every pager arm's PagerConfig has: chunk size, budget, prefetch (arm E, not when
// calibrating), eager reconcile, watchdog, read-ahead (the uring source, not when calibrating).
// With --content-digests, every fill is checked against its chunk's digest (loaded here,
// checked against the file's size and the chunk size).
PagerConfig base_pager_config(const PagerArmConfig& c, uint64_t budget_chunks, uint64_t file_bytes);

// The main thread's watch over a run: the pager's stall watchdog every 100 ms and the
// caller's own check, until the workload is done or the pager failed.
class RunMonitor {
 public:
  // From the workload's threads / the pager's failure callback.
  void workload_done();
  void pager_failed();
  // Returns "" when the workload finished; otherwise why it must be abandoned: the caller's
  // check failed, or the pager failed and the workload did not finish within `grace` (its
  // threads are blocked in faults the pager cannot serve), or at once when the pager shows
  // a thread stranded in such a fault (Pager::faults_stranded).
  std::string watch(Pager* pager, const std::function<std::string()>& check, std::chrono::milliseconds grace);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false, failed_ = false;
};

// The verdict chain of a pager-arm run: the first of the workload's own error, the pager's
// failure, the signal audit's error, a reconcile mismatch, an unclean close, the negative
// control's error, and a fault cell that did not behave ("" when the run is ok).
struct PagerVerdict {
  std::string workload;  // e.g. scan's verify error, generate's run error
  std::string audit;     // the consumption-signal audit
  std::string control;   // generate's recycle-live probe
};
std::string pager_verdict(const Pager* pager, const PagerVerdict& v, const PagerArmConfig& c, const FaultReport* fault);

// ---- run.json sections both subcommands write (docs/run-contract.md) ---------------------

// schema, subcommand, status, error, arm, policy, source engine, uffd mode.
nlohmann::json pager_run_head(const char* subcommand, const std::string& error, const PagerArmConfig& c,
                              const Pager* p);
// The shared keys of `config` (the subcommand adds its own).
nlohmann::json pager_config_json(const PagerArmConfig& c);
// `budget`: --budget-bytes, what the pager pays itself, the chunks left.
nlohmann::json pager_budget_json(const PagerArmConfig& c, const PagerBudget& b, const std::optional<uint64_t>& chunks);
// The shared keys of `counters`: the workload's access counts and the pager's.
struct AccessCounts {
  uint64_t steps = 0, accesses = 0, misses = 0, signals = 0;
  uint64_t physical_bytes_read = 0;  // /proc/self/io over the run
};
nlohmann::json pager_counters_json(const AccessCounts& a, const Pager* p);
// `latency_ns`: fault and fill quantiles.
nlohmann::json pager_latency_json(const Pager* p);
// `pager_thread`: the pager thread's nice, asked and got (null: no pager thread ran).
nlohmann::json pager_thread_json(const Pager* p);
// source_stats, plan, readahead, fault, pager_thread, protect, rejection.
void add_pager_sections(nlohmann::json& j, const Pager* p, const PagerArmConfig& c, const FaultReport* fault);

}  // namespace resid
