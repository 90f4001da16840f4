"""P6 (reference claim 6): the prefetch trade-off.

Arm E (D plus prefetch) reads extra bytes over D in exchange for fewer demand faults and
a lower fault tail. Reported per r: E's extra bytes over D, the change in demand faults
and in p99 fault latency. Asserted: E reads at least D's bytes at every r, and has fewer
demand faults than D wherever the reference saw the benefit (r >= 0.5).
"""

from __future__ import annotations

from ..arms import PAGER_DECLARED, PAGER_PREFETCH
from . import model_runs as mr
from .record import Assertion, ClaimResult, fmt

ID = "P6"
REFERENCE = ("Reference claim 6: prefetch (arm E) trades ~4-8% more bytes for ~2x fewer demand faults and lower "
             "tail latency at r >= 0.5; at r <= 0.375 it completes but reads ~13% more than arm D for only a "
             "modest latency gain.")
INPUTS = {"runs": mr.MODEL_RUNS}


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"]
    insufficient = mr.missing_cells(runs, [PAGER_DECLARED, PAGER_PREFETCH])
    cols = {"bytes": "physical_bytes_read", "faults": "demand_fills", "p99": "fault_p99_ns"}
    d = {k: mr.per_r(runs, PAGER_DECLARED, c) for k, c in cols.items()}
    e = {k: mr.per_r(runs, PAGER_PREFETCH, c) for k, c in cols.items()}
    per = []
    for r in mr.ratios(runs):
        def ratio(k):
            return e[k][r] / d[k][r] if e[k].get(r) is not None and d[k].get(r) else None
        per.append({"r": r, "d_bytes": d["bytes"].get(r), "e_bytes": e["bytes"].get(r),
                    "e_extra_bytes_fraction": (ratio("bytes") - 1) if ratio("bytes") is not None else None,
                    "d_demand_faults": d["faults"].get(r), "e_demand_faults": e["faults"].get(r),
                    "e_over_d_demand_faults": ratio("faults"),
                    "d_fault_p99_ns": d["p99"].get(r), "e_fault_p99_ns": e["p99"].get(r),
                    "e_over_d_fault_p99": ratio("p99")})
    high = [x for x in per if x["r"] >= 0.5]
    values = {
        "per_r": per,
        "e_reads_at_least_d": [x["e_extra_bytes_fraction"] is not None and x["e_extra_bytes_fraction"] >= 0 for x in per],
        "e_fewer_demand_faults_at_r_ge_0_5": [x["e_over_d_demand_faults"] is not None and x["e_over_d_demand_faults"] < 1
                                              for x in high],
    }
    headline = "E over D per r (extra bytes, demand faults, p99): " + "; ".join(
        f"{x['r']:g}: {fmt(x['e_extra_bytes_fraction'], '+.1%') if x['e_extra_bytes_fraction'] is not None else 'n/a'}, "
        f"x{fmt(x['e_over_d_demand_faults'], '.2f')}, x{fmt(x['e_over_d_fault_p99'], '.2f')}" for x in per) + "."
    assertions = [
        Assertion("/values/e_reads_at_least_d", "all_true", why="prefetch costs bytes: E reads at least D's bytes"),
        Assertion("/values/e_fewer_demand_faults_at_r_ge_0_5", "all_true",
                  why="E has fewer demand faults than D at every r >= 0.5"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
