"""P3 (reference 000, claim 3): reclaim authority.

"Without it the kernel reclaims the pager's shmem pages to swap and the authority leaks
(pgscan ~ 120,687, ~236 MiB reclaimed). With it the kernel enters reclaim
(memory.events[high] = 37), finds nothing eligible (pgscan = pgsteal = 0), and the
application's hole-punch is the only thing that frees memory."

Both halves, on the reclaim cells (results/reclaim.parquet: the pager's cgroup under
pressure below its budget, swap available, with and without --protect):

- unprotected: every cell completes with its bytes verified, and the kernel took pager
  pages to swap: v2 pgsteal > 0 (bytes reclaimed) and swap used; v1 (no pgsteal) swap used
  and anonymous pages refaulted (workingset_refault_anon > 0), its closest counterpart.
- protected: the kernel entered reclaim (v2 memory.events high > 0; v1 memory.failcnt or
  vmpressure events > 0), took nothing (no swap used; v2 pgscan = pgsteal = 0; v1 no
  anonymous refault), and the cell completed with its bytes verified while the pager's own
  evictions freed memory. On v1, memory.high does not exist (its only limit is hard, so a
  protected cell held above it is OOM-killed, not throttled) and memory.stat has no pgscan
  or pgsteal: what v1 cannot show is insufficient-evidence, named.

The reference's counts (120,687 pages, 236 MiB, 37 events) are of its machine and workload:
reported, not asserted.
"""

from __future__ import annotations

from residency.claims.record import Assertion, ClaimResult, as_int as _i

ID = "P3"
REFERENCE = ("Reference 000 claim 3 (figure 04): without the pager's protection the kernel reclaims the "
             "pager's shmem pages to swap and the authority leaks (pgscan ~ 120,687, ~236 MiB reclaimed); "
             "with it the kernel enters reclaim (memory.events[high] = 37), finds nothing eligible "
             "(pgscan = pgsteal = 0), and the application's hole-punch is the only thing that frees memory.")
INPUTS = {"runs": "results/reclaim.parquet"}

CELL_FIELDS = ("protection", "rep", "status", "error", "cgroup_version", "pressure_bytes", "high_events",
               "max_events", "pgscan", "pgsteal", "kernel_reclaimed_bytes", "swap_peak_bytes",
               "workingset_refault_anon", "pgmajfault", "failcnt", "pressure_events", "unevictable_peak_bytes",
               "region_locked_bytes", "pager_evicted_bytes", "verify_errors", "run_dir")
V1_LACKS = ("cgroup v1 has no memory.high: its only limit is hard, so the kernel cannot be shown throttling a "
            "protected cell and finding nothing to reclaim (a v1 protected cell above the limit is OOM-killed: "
            "recorded), and v1 memory.stat has no pgscan or pgsteal; run on cgroup v2 to show this half")


def _cell(row) -> dict:
    out = {}
    for k in CELL_FIELDS:
        v = row[k]
        out[k] = None if v is None or v != v else (v if isinstance(v, str) else _i(v))
    return out


def _pos(v) -> bool:
    return v is not None and v > 0


def _zero(v) -> bool:
    return v is not None and v == 0


def _completed(c: dict) -> bool:
    return c["status"] == "ok" and _zero(c["verify_errors"])


def _unprotected(cells: list[dict]) -> dict:
    v2 = [c for c in cells if c["cgroup_version"] == 2]
    v1 = [c for c in cells if c["cgroup_version"] == 1]
    return {
        "completed": [_completed(c) for c in cells],
        "kernel_took_pages_to_swap": [_pos(c["swap_peak_bytes"]) for c in cells],
        "v2_kernel_reclaimed": [_pos(c["kernel_reclaimed_bytes"]) for c in v2] or None,
        "v1_anon_refaulted": [_pos(c["workingset_refault_anon"]) for c in v1] or None,
    }


def _protected(cells: list[dict]) -> dict:
    v2 = [c for c in cells if c["cgroup_version"] == 2]
    v1 = [c for c in cells if c["cgroup_version"] == 1]
    return {
        "kernel_took_nothing_to_swap": [_zero(c["swap_peak_bytes"]) for c in cells],
        "entered_reclaim": [_pos(c["high_events"]) if c["cgroup_version"] == 2
                            else _pos(c["failcnt"]) or _pos(c["pressure_events"]) for c in cells],
        "v2_nothing_eligible": [_zero(c["pgscan"]) and _zero(c["pgsteal"]) for c in v2] or None,
        "v2_completed_by_its_own_evictions": [_completed(c) and _pos(c["pager_evicted_bytes"]) for c in v2] or None,
        "v1_no_anon_refault": [_zero(c["workingset_refault_anon"]) for c in v1] or None,
    }


def _insufficient(cells: list[dict], unprot: list[dict], prot: list[dict]) -> list[str]:
    out = [f"{c['run_dir']}: the reclaim cell could not be made here: {c['error']}"
           for c in cells if c["status"] == "unavailable"]
    if not unprot:
        out.append("no unprotected reclaim cell in results/reclaim.parquet")
    if not prot:
        out.append("no protected reclaim cell in results/reclaim.parquet")
    if any(c["cgroup_version"] == 1 for c in prot):
        out.append("protected half: " + V1_LACKS)
    return out


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"].sort_values(["protection", "rep"])
    cells = [_cell(r) for _, r in runs.iterrows()]
    made = [c for c in cells if c["status"] != "unavailable"]
    unprot = [c for c in made if c["protection"] == "unprotected"]
    prot = [c for c in made if c["protection"] == "protected"]
    values = {"cells": cells, "unprotected": _unprotected(unprot), "protected": _protected(prot),
              "cgroup_versions": sorted({c["cgroup_version"] for c in made if c["cgroup_version"] is not None})}
    insufficient = _insufficient(cells, unprot, prot)
    took = [c["swap_peak_bytes"] or 0 for c in unprot]
    headline = (f"Unprotected: the kernel put up to {max(took, default=0) / 2**20:.1f} MiB of the cell to swap "
                f"in {sum(_pos(x) for x in took)} of {len(unprot)} cells; protected: "
                f"{sum(_zero(c['swap_peak_bytes']) for c in prot)} of {len(prot)} cells had nothing taken "
                f"(cgroup v{'/'.join(map(str, values['cgroup_versions'])) or '?'}).")
    assertions = [
        Assertion("/values/unprotected/completed", "all_true", why="unprotected: every cell completed, bytes verified"),
        Assertion("/values/unprotected/kernel_took_pages_to_swap", "all_true",
                  why="unprotected: the kernel reclaimed the pager's pages to swap (the authority leaks)"),
        Assertion("/values/protected/kernel_took_nothing_to_swap", "all_true",
                  why="protected: the kernel put nothing of the cell to swap"),
        Assertion("/values/protected/entered_reclaim", "all_true",
                  why="protected: the kernel entered reclaim (v2 memory.events high; v1 failcnt or vmpressure)"),
    ]
    versions = values["cgroup_versions"]
    if 2 in versions:
        assertions += [
            Assertion("/values/unprotected/v2_kernel_reclaimed", "all_true", why="unprotected (v2): pgsteal > 0"),
            Assertion("/values/protected/v2_nothing_eligible", "all_true", why="protected (v2): pgscan = pgsteal = 0"),
            Assertion("/values/protected/v2_completed_by_its_own_evictions", "all_true",
                      why="protected (v2): completed, verified, the pager's evictions the only frees"),
        ]
    if 1 in versions:
        assertions += [
            Assertion("/values/unprotected/v1_anon_refaulted", "all_true",
                      why="unprotected (v1 counterpart of pgsteal): anonymous pages refaulted from swap"),
            Assertion("/values/protected/v1_no_anon_refault", "all_true",
                      why="protected (v1): no anonymous page refaulted"),
        ]
    return ClaimResult(headline, values, assertions, insufficient)
