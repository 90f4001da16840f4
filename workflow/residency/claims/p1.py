"""P1 (reference claim 1, synthetic half): LRU misses every chunk of a cyclic scan.

On a cyclic layer scan whose working set exceeds the budget, LRU evicts exactly the chunk
needed soonest, so arm C (the kernel's own rule, run by the pager) should miss every chunk
after the cold pass, in every cell, and read the whole region from storage every pass.
"""

from __future__ import annotations

from residency.core.arms import PAGER_LRU
from residency.claims.record import Assertion, ClaimResult, as_float as _f, as_int as _i, fmt as _fmt

ID = "P1"
REFERENCE = ("Reference claim 1: on a cyclic layer scan whose working set exceeds the budget, "
             "arm C (LRU run through the pager) misses ~100% at every budget ratio and reads the "
             "whole model every scan; synthetic: miss rate exactly 1.000 in every cell, read_bytes = "
             "the entire 2 GiB region every run.")
INPUTS = {"runs": "results/pager_synthetic.parquet"}


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"]
    c = runs[runs["arm"] == PAGER_LRU].sort_values(["campaign", "r", "threads", "compute_us", "signal", "rep"])
    insufficient = []
    if c.empty:
        insufficient.append("no arm C (pager-lru) runs in results/pager_synthetic.parquet")
    frac_min = float(settings["whole_region_min_fraction"])
    cells = []
    for _, row in c.iterrows():
        region_passes = row["region_bytes"] * row["passes"] if row["region_bytes"] and row["passes"] else None
        per_pass = (row["physical_bytes_read"] / region_passes) if region_passes and row["physical_bytes_read"] is not None else None
        cells.append({
            "campaign": row["campaign"], "r": row["r"], "rep": int(row["rep"]), "threads": int(row["threads"]),
            "compute_us": int(row["compute_us"]), "signal": row["signal"], "status": row["status"],
            "accesses": _i(row["accesses"]), "misses": _i(row["misses"]),
            "accesses_after_cold": _i(row["accesses_after_cold"]), "misses_after_cold": _i(row["misses_after_cold"]),
            "miss_rate": _f(row["miss_rate"]),
            "physical_bytes_read": _i(row["physical_bytes_read"]),
            "physical_per_pass_over_region": _f(per_pass),
            "run_dir": row["run_dir"],
        })
        if row["accesses_after_cold"] in (None, 0) or row["accesses_after_cold"] != row["accesses_after_cold"]:
            insufficient.append(f"{row['run_dir']}: no accesses after the cold pass (trace missing or one pass)")
    ok = [x["status"] == "ok" for x in cells]
    missed_all = [x["accesses_after_cold"] is not None and x["misses_after_cold"] == x["accesses_after_cold"] for x in cells]
    whole = [x["physical_per_pass_over_region"] is not None and x["physical_per_pass_over_region"] >= frac_min for x in cells]
    rates = [x["miss_rate"] for x in cells if x["miss_rate"] is not None]
    per_pass = [x["physical_per_pass_over_region"] for x in cells if x["physical_per_pass_over_region"] is not None]
    values = {
        "cells": cells,
        "runs": len(cells),
        "runs_ok": ok,
        "missed_every_chunk_after_cold": missed_all,
        "read_whole_region_every_pass": whole,
        "miss_rate_min": min(rates) if rates else None,
        "physical_per_pass_over_region_min": min(per_pass) if per_pass else None,
        "physical_per_pass_over_region_max": max(per_pass) if per_pass else None,
    }
    n_missed = sum(missed_all)
    headline = (f"Arm C (LRU through the pager) missed every chunk after the cold pass in {n_missed} of "
                f"{len(cells)} runs (lowest miss rate {values['miss_rate_min']}), reading "
                f"{_fmt(values['physical_per_pass_over_region_min'])}-{_fmt(values['physical_per_pass_over_region_max'])}"
                f" x the region per pass.")
    assertions = [
        Assertion("/values/runs_ok", "all_true", why="every arm C run completed and verified its bytes"),
        Assertion("/values/missed_every_chunk_after_cold", "all_true",
                  why="LRU misses every access after the cold pass"),
        Assertion("/values/read_whole_region_every_pass", "all_true",
                  why=f"physical bytes per pass >= {frac_min} x region"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)

