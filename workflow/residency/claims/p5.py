"""P5 (reference step 5, synthetic half): the racy signal breaks determinism, the exact one restores it.

The reference's sentence has two halves, and both are asserted on the stress matrix
(driver threads x compute phase, arms C and D at one ratio, every cell run with both
signals on the same seeded jitter):

- racy half: the thread0-started signal gives repetitions that differ in some stress
  cell (the race happened here);
- exact half: the all-threads-finished signal gives identical repetitions in every
  stress cell.

"Identical" is judged on what records the policy's decisions. In lockstep cells
(`sync: step`) that is the whole trace, byte for byte. In free-running cells (`sync:
none`) the fill, eviction and signal records are stamped with the pager's cursor, which
timing moves even for a policy that ignores the signal (seen: LRU's traces differed
between repetitions with identical accesses and misses), so there it is the access
outcomes (step, chunk, miss) in order; both digests are reported per cell.

Either half failing fails the claim, and the reason names the half. The race can only
happen where driver threads are not in lockstep (`sync: none`) and there are at least two
of them; a matrix without such a cell cannot show the racy half (insufficient-evidence).
The record also reports the contrast the data shows: demand fills and misses per signal.
"""

from __future__ import annotations

from residency.claims.record import Assertion, ClaimResult, as_float, as_int

ID = "P5"
REFERENCE = ("Reference step 5 (synthetic): the naive 'thread 0 started this chunk' signal races the "
             "other driver threads and makes the policy non-deterministic under concurrency + compute; "
             "firing it only when all threads finish the chunk restores determinism at all six stress cells.")
INPUTS = {"determinism": "results/pager_synthetic_determinism.parquet"}
EXACT, RACY = "all-threads-finished", "thread0-started"


def _cell(row) -> dict:
    return {
        "arm": row["arm"], "r": as_float(row["r"]), "threads": int(row["threads"]),
        "compute_us": int(row["compute_us"]), "signal": row["signal"], "sync": row["sync"],
        "jitter_us": int(row["jitter_us"]), "reps": int(row["reps"]), "reps_ok": int(row["reps_ok"]),
        "distinct_traces": int(row["distinct_traces"]), "identical": bool(row["identical"]),
        "distinct_outcomes": int(row["distinct_outcomes"]), "outcomes_identical": bool(row["outcomes_identical"]),
        "deterministic": bool(row["identical"] if row["sync"] == "step" else row["outcomes_identical"]),
        "misses_min": as_int(row["misses_min"]), "misses_max": as_int(row["misses_max"]),
        "evictions_min": as_int(row["evictions_min"]), "evictions_max": as_int(row["evictions_max"]),
        "demand_fills_min": as_int(row["demand_fills_min"]), "demand_fills_max": as_int(row["demand_fills_max"]),
        "differing_records": as_int(row["differing_records"]),
        "first_differing_step": as_int(row["first_differing_step"]),
    }


def race_possible(cell: dict) -> bool:
    """The racy signal can race only free-running driver threads, and only two or more."""
    return cell["sync"] == "none" and cell["threads"] > 1


def _span(cells: list[dict], key: str) -> list[int | None]:
    lo = [c[f"{key}_min"] for c in cells if c[f"{key}_min"] is not None]
    hi = [c[f"{key}_max"] for c in cells if c[f"{key}_max"] is not None]
    return [min(lo) if lo else None, max(hi) if hi else None]


def contrast(cells: list[dict]) -> dict:
    """What one signal did across the stress cells where the race can happen."""
    racing = [c for c in cells if race_possible(c)]
    return {"cells": len(racing), "cells_differing": sum(not c["deterministic"] for c in racing),
            "cells_traces_differing": sum(c["distinct_traces"] > 1 for c in racing),
            "distinct_traces": sum(c["distinct_traces"] for c in racing),
            "distinct_outcomes": sum(c["distinct_outcomes"] for c in racing),
            "demand_fills_range": _span(racing, "demand_fills"), "misses_range": _span(racing, "misses")}


def _insufficient(exact: list[dict], racy: list[dict]) -> list[str]:
    out = []
    for name, cells in ((EXACT, exact), (RACY, racy)):
        if not cells:
            out.append(f"no stress cells with the {name} signal")
        if any(c["reps"] < 2 for c in cells):
            out.append(f"a {name} stress cell has fewer than 2 repetitions: determinism cannot be judged")
    if racy and not any(race_possible(c) for c in racy):
        out.append("racy half: no stress cell where the race can happen (free-running driver threads, sync none, "
                   "and at least 2 of them): this matrix cannot show it")
    return out


def compute(frames, settings) -> ClaimResult:
    det = frames["determinism"]
    stress = det[det["campaign"] == "stress"].sort_values(["signal", "arm", "threads", "compute_us"])
    exact = [_cell(r) for _, r in stress[stress["signal"] == EXACT].iterrows()]
    racy = [_cell(r) for _, r in stress[stress["signal"] == RACY].iterrows()]
    cells_per_arm = {}
    for c in exact:
        cells_per_arm[c["arm"]] = cells_per_arm.get(c["arm"], 0) + 1
    values = {
        "exact_signal_cells": exact,
        "exact_signal_deterministic": [c["deterministic"] for c in exact],
        "exact_signal_cells_per_arm": cells_per_arm,
        "racy_signal_cells": racy,
        "racy_signal_cells_differing": sum(1 for c in racy if not c["deterministic"]),
        "racy_signal_cells_total": len(racy),
        "race_possible_cells": sum(1 for c in racy if race_possible(c)),
        "contrast": {EXACT: contrast(exact), RACY: contrast(racy)},
    }
    n_ident = sum(values["exact_signal_deterministic"])
    ce, cr = values["contrast"][EXACT], values["contrast"][RACY]
    headline = (f"Racy half: with thread0-started, {values['racy_signal_cells_differing']} of {len(racy)} stress "
                f"cells gave repetitions that differ (demand fills {cr['demand_fills_range']} where the race can "
                f"happen); exact half: with all-threads-finished, {n_ident} of {len(exact)} cells gave identical "
                f"repetitions (demand fills {ce['demand_fills_range']}).")
    assertions = [
        Assertion("/values/racy_signal_cells_differing", "ge", 1,
                  why="racy half: the thread0-started signal gives repetitions that differ in some stress cell"),
        Assertion("/values/exact_signal_deterministic", "all_true",
                  why="exact half: the all-threads-finished signal gives identical repetitions in every stress cell "
                      "(whole traces in lockstep, access outcomes when free-running)"),
    ]
    return ClaimResult(headline, values, assertions, _insufficient(exact, racy))
