"""P6 (reference claim 6): the prefetch trade-off, both halves of the reference's sentence.

Arm E (D plus prefetch) against arm D, per budget ratio r, from the means over valid reps:

- high half (r >= 0.5): E reads more bytes than D, has fewer demand faults and a lower
  p99 demand-fault latency;
- low half (r <= 0.375): E completes (every E run valid) and reads more than D, for a
  latency gain (lower p99 demand-fault latency). The reference calls that gain "modest"
  without a number; its size is reported per r, not asserted.

Which latency (revision "P6 r1", docs/protocol-revisions.md): the reference's sentence pairs
"fewer demand faults" with "lower tail latency", so its latency is a demand fault's service
time (latency_ns.demand_fault_p99: the faults that read their own chunk). Beside it, not
asserted: every exposed wait's p99 (latency_ns.fault_p99, which also counts a fault that
waited for a prefetch already in flight) and a decode token's p99
(generation.token_latency_ns.p99).

A half whose ratios the campaign did not run, or whose fault latency cannot be compared
(a p99 missing or zero), is insufficient-evidence with the reason, never a pass.
"""

from __future__ import annotations

from residency.core.arms import PAGER_DECLARED, PAGER_PREFETCH
from residency.claims import model_runs as mr
from residency.claims.record import Assertion, ClaimResult, fmt

ID = "P6"
REFERENCE = ("Reference claim 6: prefetch (arm E) trades ~4-8% more bytes for ~2x fewer demand faults and lower "
             "tail latency at r >= 0.5; at r <= 0.375 it completes but reads ~13% more than arm D for only a "
             "modest latency gain.")
INPUTS = {"runs": mr.MODEL_RUNS}
HIGH_MIN_R, LOW_MAX_R = 0.5, 0.375  # the reference's two regimes
REVISION = {
    "revision": "P6 r1 (issue 22)",
    "change": ("the latency asserted is a demand fault's p99 service time (demand_fault_p99_ns: faults that read "
               "their own chunk); every exposed wait's p99 (fault_p99_ns) and a decode token's p99 (token_p99_ns) "
               "are reported beside it. Before: fault_p99_ns, which also counts faults that waited for a prefetch "
               "read already in flight"),
    "reason": ("under E a fault that finds its chunk's prefetch in flight waits for a whole prefetch read; counting "
               "it measured the prefetch's own reads, not the demand faults the sentence speaks of"),
    "follows": ("000: \"It trades ~4-8 % more bytes for ~2x fewer demand faults and lower tail latency at r >= 0.5\" "
                "(the tail latency of the demand faults it names)"),
}


def _per_r(runs) -> list[dict]:
    cols = {"bytes": "physical_bytes_read", "faults": "demand_fills", "p99": "demand_fault_p99_ns",
            "wait_p99": "fault_p99_ns", "token_p99": "token_p99_ns"}
    d = {k: mr.per_r(runs, PAGER_DECLARED, c) for k, c in cols.items()}
    e = {k: mr.per_r(runs, PAGER_PREFETCH, c) for k, c in cols.items()}
    e_runs = mr.main_runs(runs, PAGER_PREFETCH)
    per = []
    for r in mr.ratios(runs):
        def ratio(k):
            return e[k][r] / d[k][r] if e[k].get(r) is not None and d[k].get(r) else None
        at_r = e_runs[e_runs["r"] == r]
        per.append({"r": r, "e_runs": len(at_r), "e_runs_valid": int(at_r["valid"].sum()),
                    "d_bytes": d["bytes"].get(r), "e_bytes": e["bytes"].get(r), "e_over_d_bytes": ratio("bytes"),
                    "d_demand_faults": d["faults"].get(r), "e_demand_faults": e["faults"].get(r),
                    "e_over_d_demand_faults": ratio("faults"),
                    "d_demand_fault_p99_ns": d["p99"].get(r), "e_demand_fault_p99_ns": e["p99"].get(r),
                    "e_over_d_demand_fault_p99": ratio("p99") if e["p99"].get(r) else None,
                    "d_fault_p99_ns": d["wait_p99"].get(r), "e_fault_p99_ns": e["wait_p99"].get(r),
                    "e_over_d_fault_p99": ratio("wait_p99") if e["wait_p99"].get(r) else None,
                    "d_token_p99_ns": d["token_p99"].get(r), "e_token_p99_ns": e["token_p99"].get(r),
                    "e_over_d_token_p99": ratio("token_p99") if e["token_p99"].get(r) else None})
    return per


def _less(v) -> bool | None:
    return None if v is None else v < 1


def _half(rows: list[dict], checks: dict) -> dict:
    """Per check, one item per r of the half (None where that r cannot say)."""
    return {name: [f(x) for x in rows] for name, f in checks.items()}


HIGH_CHECKS = {"e_reads_more": lambda x: None if x["e_over_d_bytes"] is None else x["e_over_d_bytes"] > 1,
               "e_fewer_demand_faults": lambda x: _less(x["e_over_d_demand_faults"]),
               "e_lower_demand_fault_p99": lambda x: _less(x["e_over_d_demand_fault_p99"])}
LOW_CHECKS = {"e_completes": lambda x: x["e_runs"] > 0 and x["e_runs_valid"] == x["e_runs"],
              "e_reads_more": HIGH_CHECKS["e_reads_more"],
              "e_lower_demand_fault_p99": HIGH_CHECKS["e_lower_demand_fault_p99"]}


def _insufficient(name: str, rows: list[dict], half: dict) -> list[str]:
    if not rows:
        return [f"{name} half: the campaign ran no r in it, so this machine's run cannot show it"]
    return [f"{name} half: {check} cannot be judged at r={x['r']:g} (a mean is missing or D's is zero)"
            for check, items in half.items() for x, v in zip(rows, items) if v is None]


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"]
    insufficient = mr.missing_cells(runs, [PAGER_DECLARED, PAGER_PREFETCH])
    per = _per_r(runs)
    high_rows = [x for x in per if x["r"] >= HIGH_MIN_R]
    low_rows = [x for x in per if x["r"] <= LOW_MAX_R]
    high, low = _half(high_rows, HIGH_CHECKS), _half(low_rows, LOW_CHECKS)
    insufficient += _insufficient(f"high (r >= {HIGH_MIN_R:g})", high_rows, high)
    insufficient += _insufficient(f"low (r <= {LOW_MAX_R:g})", low_rows, low)
    values = {"per_r": per, "high_r": {"ratios": [x["r"] for x in high_rows], **high},
              "low_r": {"ratios": [x["r"] for x in low_rows], **low}}
    headline = ("E over D per r (bytes, demand faults, p99 demand-fault latency; beside: p99 of every exposed "
                "wait, p99 token latency): " + "; ".join(
                    f"{x['r']:g}: x{fmt(x['e_over_d_bytes'], '.3f')}, x{fmt(x['e_over_d_demand_faults'], '.2f')}, "
                    f"x{fmt(x['e_over_d_demand_fault_p99'], '.2f')}; x{fmt(x['e_over_d_fault_p99'], '.2f')}, "
                    f"x{fmt(x['e_over_d_token_p99'], '.2f')}" for x in per) + ".")
    assertions = [Assertion(f"/values/high_r/{k}", "all_true", why=f"high half (r >= {HIGH_MIN_R:g}): {why}")
                  for k, why in (("e_reads_more", "E reads more bytes than D"),
                                 ("e_fewer_demand_faults", "E has fewer demand faults than D"),
                                 ("e_lower_demand_fault_p99", "E's p99 demand-fault latency is lower than D's"))]
    assertions += [Assertion(f"/values/low_r/{k}", "all_true", why=f"low half (r <= {LOW_MAX_R:g}): {why}")
                   for k, why in (("e_completes", "every E run completes, exact"),
                                  ("e_reads_more", "E reads more bytes than D"),
                                  ("e_lower_demand_fault_p99",
                                   "for a latency gain: E's p99 demand-fault latency is lower"))]
    return ClaimResult(headline, values, assertions, insufficient)
