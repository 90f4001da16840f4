"""P5 (reference step 5, synthetic half): the exact consumption signal makes D deterministic.

In the stress matrix (driver threads x compute phase, arms C and D at one ratio), the
all-threads-finished signal should give byte-identical traces across repetitions in every
cell. For the racy thread0-started signal the record reports what differs (distinct
traces, records that differ, miss ranges); it asserts nothing about it.
"""

from __future__ import annotations

from .record import Assertion, ClaimResult, as_float, as_int

ID = "P5"
REFERENCE = ("Reference step 5 (synthetic): the naive 'thread 0 started this chunk' signal races the "
             "other driver threads and makes the policy non-deterministic under concurrency + compute; "
             "firing it only when all threads finish the chunk restores determinism at all six stress cells.")
INPUTS = {"determinism": "results/pager_synthetic_determinism.parquet"}


def _cell(row) -> dict:
    return {
        "arm": row["arm"], "r": as_float(row["r"]), "threads": int(row["threads"]),
        "compute_us": int(row["compute_us"]), "signal": row["signal"],
        "reps": int(row["reps"]), "reps_ok": int(row["reps_ok"]),
        "distinct_traces": int(row["distinct_traces"]), "identical": bool(row["identical"]),
        "misses_min": as_int(row["misses_min"]), "misses_max": as_int(row["misses_max"]),
        "evictions_min": as_int(row["evictions_min"]), "evictions_max": as_int(row["evictions_max"]),
        "differing_records": as_int(row["differing_records"]),
        "first_differing_step": as_int(row["first_differing_step"]),
    }


def compute(frames, settings) -> ClaimResult:
    det = frames["determinism"]
    stress = det[det["campaign"] == "stress"].sort_values(["signal", "arm", "threads", "compute_us"])
    exact = [_cell(r) for _, r in stress[stress["signal"] == "all-threads-finished"].iterrows()]
    racy = [_cell(r) for _, r in stress[stress["signal"] == "thread0-started"].iterrows()]
    insufficient = []
    if not exact:
        insufficient.append("no stress cells with the all-threads-finished signal")
    if any(c["reps"] < 2 for c in exact):
        insufficient.append("a stress cell has fewer than 2 repetitions: determinism cannot be judged")
    cells_per_arm = {}
    for c in exact:
        cells_per_arm[c["arm"]] = cells_per_arm.get(c["arm"], 0) + 1
    values = {
        "exact_signal_cells": exact,
        "exact_signal_identical": [c["identical"] for c in exact],
        "exact_signal_cells_per_arm": cells_per_arm,
        "racy_signal_cells": racy,
        "racy_signal_cells_differing": sum(1 for c in racy if c["distinct_traces"] > 1),
        "racy_signal_cells_total": len(racy),
    }
    n_ident = sum(values["exact_signal_identical"])
    headline = (f"With all-threads-finished, {n_ident} of {len(exact)} stress cells gave byte-identical "
                f"traces across repetitions; with thread0-started, {values['racy_signal_cells_differing']} of "
                f"{len(racy)} cells differed between repetitions.")
    assertions = [
        Assertion("/values/exact_signal_identical", "all_true",
                  why="byte-identical traces across reps in every stress cell with the exact signal"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
