// The pager's configuration and what it reports (pager.hpp has the design they refer to).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/types.hpp"
#include "plan/state.hpp"

namespace resid {

enum class HugeChunks { Off, Move, Collapse };
const char* to_string(HugeChunks h);
std::optional<HugeChunks> parse_huge_chunks(std::string_view s);

struct PagerConfig {
  uint64_t chunk_size = 2u << 20;  // multiple of the page size
  uint64_t budget_chunks = 0;      // >= 1
  uint32_t prefetch_depth = 0;     // candidates asked of the policy per prefetch decision
  bool eager_reconcile = false;    // mincore check after every fill and eviction
  double watchdog_s = 60;          // a fault unserved this long fails the pager
  // Object steps (generate): step s touches step_chunks[s % size]; the signal for a step is
  // audited and traced for each of its chunks. Empty: chunk steps (scan), step s is chunk
  // s mod chunks.
  std::vector<std::vector<ChunkId>> step_chunks;
  // Oversize steps: pins for at most this many threads (the compute threads); 0 = no limit.
  uint32_t max_pins = 0;
  HugeChunks huge = HugeChunks::Off;
  // Read the coming steps' chunks ahead (header; needs a source with two or more windows).
  bool readahead = false;
  // How many steps ahead of the current one read-ahead reaches: 0 = as far as the windows
  // free for read-ahead reach (every one but the demand window kept busy); 1 = the next step.
  uint32_t readahead_steps_ahead = 0;
  // Per step of a pass: the chunks read ahead for it (empty list: none). Empty: the
  // steps' own chunks (step_chunks, or chunk s mod chunks).
  std::vector<std::vector<ChunkId>> readahead_steps;
  // Content identity (drivers/common/content_digests.hpp): per chunk, the XXH64 of its file bytes;
  // every fill is checked against it before it is published. Empty: no check.
  std::vector<uint64_t> chunk_digests;
  // Reclaim authority (reference 000, claim 3): the process's memory is locked on fault
  // (mlockall MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT: the region and everything else the
  // process maps, so a reclaim counter of its cgroup isolates the pager), and the kernel can
  // reclaim or swap none of it; only the pager's own evictions (MADV_DONTNEED_LOCKED) free
  // memory. The destructor unlocks the process (one pager per process).
  bool protect = false;
  // Chunk steps only (step_chunks empty): a demand fault for a step beyond the step after
  // the latest consumption signal waits for that signal before its victims are chosen
  // (header: faults ahead of the cursor). Off: every fault is decided when it is read.
  bool defer_ahead_faults = false;
  // The reset-outstanding fault cell (generate): once read N has been submitted and reads
  // are outstanding (two or more when the source's depth allows: inside a read-ahead
  // bundle), the pager thread resets the Plan (reset.cpp). Unset: never.
  std::optional<uint64_t> reset_at_read;
  // The pager thread's nice value, set when the thread starts (setpriority on its own tid).
  // A value below the process's needs CAP_SYS_NICE; when refused, the thread keeps the
  // process's and PagerThreadStats says why. Unset: the process's.
  std::optional<int> thread_nice;
};

// The pager thread's scheduling priority as it ran (PagerConfig::thread_nice).
struct PagerThreadStats {
  bool started = false;            // the thread ran (a pager never started has no priority)
  std::optional<int> nice_requested;
  int nice = 0;                    // getpriority of the thread after the request
  int nice_errno = 0;              // setpriority's errno when refused, else 0
};

// What the Plan resets did (reset.cpp): the reset-outstanding cell's and every other one.
struct PagerResetStats {
  uint64_t resets = 0;                // Plan resets done by the pager thread
  bool cell_fired = false;            // the reset-outstanding cell reset the Plan
  uint64_t cell_read = 0;             // the read count at that point (reads submitted - 1)
  uint64_t cell_outstanding = 0;      // the Plan's outstanding source operations at it
  uint64_t bundles_forgotten = 0;     // unpublished bundles dropped by resets (re-requested on demand)
  uint64_t stale_published = 0;       // bundles published after a reset that were requested before it (must be 0)
};

struct PagerStats {
  uint64_t demand_fills = 0, prefetch_fills = 0, prefetch_used = 0, evictions = 0;
  uint64_t faults_handled = 0, spurious_faults = 0, signals = 0, signals_out_of_order = 0;
  uint64_t resident_chunks = 0, max_resident_chunks = 0;
  uint64_t reconcile_checks = 0, reconcile_mismatches = 0;
  uint64_t max_present_pages = 0;  // most pages mincore saw present at one check
  uint64_t unmap_events = 0, unmapped_chunks = 0, copy_retries = 0;
  uint64_t fault_count = 0, fault_p50_ns = 0, fault_p99_ns = 0, fault_max_ns = 0;
  uint64_t demand_fault_count = 0, demand_fault_p50_ns = 0, demand_fault_p99_ns = 0, demand_fault_max_ns = 0;
  uint64_t fill_count = 0, fill_p50_ns = 0, fill_p99_ns = 0, fill_max_ns = 0;
  // Oversize steps.
  uint64_t oversize_steps = 0;   // steps that ran oversize
  uint64_t pin_moves = 0;        // a thread's pin moved to another chunk
  uint64_t max_pins = 0;         // most (thread, chunk) pins held at once
  uint64_t in_step_refills = 0;  // demand fills of a chunk already demand-filled in the same step
  // Huge chunks.
  uint64_t move_fills = 0;       // fills published whole with UFFDIO_MOVE
  uint64_t move_fallbacks = 0;   // fills where UFFDIO_MOVE failed (COPY took over)
  uint64_t move_busy_fallbacks = 0;  // of those, the ones still EBUSY after the retries (transient)
  int move_first_errno = 0;
  uint64_t move_recycles = 0;    // evictions whose pages went back to an empty window (region.hpp)
  uint64_t recycle_misses = 0;   // evictions that tried and were refused (the window refilled: EEXIST), then discarded
  int recycle_first_errno = 0;   // of a refused recycle, or of a window's registration
  uint64_t collapses = 0, collapse_failures = 0;
  int collapse_first_errno = 0;
  // The fill machinery (every fill is a Plan bundle).
  uint64_t bundles_published = 0;
  uint64_t readahead_bundles = 0;  // read-ahead bundles published
  uint64_t readahead_fills = 0;    // chunks they filled (also counted in prefetch_fills)
  uint64_t readahead_waits = 0;    // faults that waited for a read-ahead or prefetch read in flight
  uint64_t readahead_no_room = 0;  // times a landed bundle's publication waited for room (a leave)
  uint64_t readahead_max_ahead = 0;  // most steps ahead of the current one a bundle was read for
  // Exposed source wait: over every fault message on the region (each one a compute thread
  // blocked), the time from reading it to waking its thread.
  uint64_t exposed_wait_ns = 0;
  uint64_t waited_faults = 0;
  uint64_t plan_recycle_refusals = 0;  // evictions the Plan refused (consumers-live)
  uint64_t consumed_early = 0;         // leave_consumed: chunks let go before their step ended
  uint64_t deferred_faults = 0;        // demand faults that waited for the signal of the step before theirs
  // Content identity (PagerConfig::chunk_digests).
  uint64_t content_checks = 0, content_check_ns = 0, content_mismatches = 0;
  PagerResetStats reset;
  PagerThreadStats thread;
};

// The first fatal rejection of a read (a storage fault, or an injected one): the bundle it
// belonged to, and how many of that bundle's chunks were ever published (must stay 0).
struct PagerRejectionReport {
  bool any = false;
  PlanError kind = PlanError::None;
  uint64_t step = 0;
  std::vector<ChunkId> bundle;
  uint64_t bundle_chunks_published = 0;
};

}  // namespace resid
