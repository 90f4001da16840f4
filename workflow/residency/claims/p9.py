"""P9 (reference claim 9): throughput scaling with the budget.

Kernel-rule arms (A: kernel mmap, C: LRU through the pager) stay flat as r grows; the
informed arms (D, E) rise monotonically. "Flat" and "rising" are judged with the
thresholds in config `claims` (noise on a shared machine is real). The record also reports
each arm's fraction of the I/O roofline measured in the same campaign (roofline.py); the
reference states no target for it, so no assertion judges it.

Each arm's physical bytes per token over the model's bytes, per r, are in the values beside
its tokens/s: the mechanism behind a kernel arm that is not flat. (Seen here: arm A's bytes
per token fall from several model sizes at the smallest r to about one at the largest, the
kernel's read-ahead and page cache under a v1 memory cgroup, so its tokens/s rise with r.)
An r at which A's host limit holds the whole model and its overhead is named and leaves the
claim insufficient-evidence (model_runs.kernel_holds_model): A's flatness needs a budget below it.
"""

from __future__ import annotations

import pandas as pd

from residency.analysis import roofline as rl
from residency.core.arms import KERNEL_MMAP, PAGER_DECLARED, PAGER_LRU, PAGER_PREFETCH
from residency.claims import model_runs as mr
from residency.claims.record import Assertion, ClaimResult, fmt

ID = "P9"
REFERENCE = ("Reference claim 9: give the kernel more budget and tokens/s does not move (arm A ~0.7 and arm C "
             "~1.0 t/s, flat across a 3x budget range); give the app-authoritative pager more budget and "
             "tokens/s rises 1.12 -> 2.85 t/s (2.5x, monotone); all arms sit far below the 13.2 t/s "
             "unconstrained baseline.")
INPUTS = {"runs": mr.MODEL_RUNS, "opt": mr.MODEL_OPT, "roofline": mr.MODEL_ROOFLINE}
KERNEL_ARMS = [KERNEL_MMAP, PAGER_LRU]
INFORMED_ARMS = [PAGER_DECLARED, PAGER_PREFETCH]


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"]
    arms = KERNEL_ARMS + INFORMED_ARMS
    insufficient = mr.unenforced(runs, arms) + mr.missing_cells(runs, arms) + mr.kernel_holds_model(runs)
    flat_max = float(settings["p9_flat_max_ratio"])
    rise_min = float(settings["p9_rise_min_ratio"])
    tol = float(settings["p9_monotone_tolerance"])
    tps = {arm: mr.per_r(runs, arm, "tokens_per_s") for arm in KERNEL_ARMS + INFORMED_ARMS}
    traffic = {arm: mr.per_r(runs, arm, "physical_bytes_per_token") for arm in KERNEL_ARMS + INFORMED_ARMS}
    model_bytes = float(runs["model_bytes"].dropna().iloc[0]) if runs["model_bytes"].notna().any() else None
    base = runs[(runs["campaign"] == "baseline") & runs["valid"]]["tokens_per_s"]
    arms = {}
    for arm, series in tps.items():
        xs = [series[r] for r in sorted(series)]
        spread = max(xs) / min(xs) if xs and min(xs) > 0 else None
        steps_ok = [b >= a * (1 - tol) for a, b in zip(xs, xs[1:])]
        arms[arm] = {"tokens_per_s_per_r": [{"r": r, "tokens_per_s": series[r]} for r in sorted(series)],
                     "max_over_min": spread,
                     "largest_r_over_smallest_r": (xs[-1] / xs[0]) if len(xs) >= 2 and xs[0] > 0 else None,
                     "monotone_steps": steps_ok,
                     "bytes_per_token_over_model_per_r": [
                         {"r": r, "bytes_per_token_over_model": traffic[arm][r] / model_bytes if model_bytes else None}
                         for r in sorted(traffic[arm])]}
    values = {
        "arms": arms,
        "baseline_tokens_per_s": float(base.mean()) if len(base) else None,
        "kernel_arms_flat": [arms[a]["max_over_min"] is not None and arms[a]["max_over_min"] <= flat_max
                             for a in KERNEL_ARMS],
        "informed_arms_rise": [arms[a]["largest_r_over_smallest_r"] is not None
                               and arms[a]["largest_r_over_smallest_r"] >= rise_min for a in INFORMED_ARMS],
        "informed_arms_monotone": [all(arms[a]["monotone_steps"]) and bool(arms[a]["monotone_steps"])
                                   for a in INFORMED_ARMS],
    }
    values["roofline"] = roofline_values(runs, frames["opt"], frames["roofline"])
    headline = ("Tokens/s from the smallest to the largest r: " + "; ".join(
        f"{a}: x{fmt(arms[a]['largest_r_over_smallest_r'], '.2f')}" for a in KERNEL_ARMS + INFORMED_ARMS)
        + f"; unconstrained baseline {fmt(values['baseline_tokens_per_s'], '.1f')} tok/s; physical bytes per token "
        + "over the model from the smallest to the largest r: " + "; ".join(
            f"{a}: {_traffic_span(arms[a])}" for a in KERNEL_ARMS + INFORMED_ARMS) + "."
        + roofline_headline(values["roofline"]))
    assertions = [
        Assertion("/values/kernel_arms_flat", "all_true", why=f"A and C: max/min tokens/s over r <= {flat_max}"),
        Assertion("/values/informed_arms_rise", "all_true",
                  why=f"D and E: tokens/s at the largest r >= {rise_min} x at the smallest"),
        Assertion("/values/informed_arms_monotone", "all_true",
                  why=f"D and E: no step to a larger r loses more than {tol:.0%}"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)


def _traffic_span(arm: dict) -> str:
    xs = [x["bytes_per_token_over_model"] for x in arm["bytes_per_token_over_model_per_r"]]
    return f"{fmt(xs[0], '.2f')} -> {fmt(xs[-1], '.2f')}" if xs else "n/a"


def roofline_values(runs, opt, calib) -> dict:
    """Each arm's fraction of the I/O roofline per r (reported, not asserted: the reference
    states no roofline target)."""
    try:
        roof = rl.bound(runs, opt, calib)
    except rl.RooflineError as e:
        return {"error": str(e)}
    frac = rl.fractions(runs, roof)
    return {
        "bandwidth_bytes_per_s": float(roof["bandwidth_bytes_per_s"].iloc[0]) if len(roof) else rl.bandwidth(calib),
        "compute_tokens_per_s": float(roof["compute_tokens_per_s"].iloc[0]) if len(roof) else rl.compute_rate(runs),
        "per_r": [{"r": float(x.r), "opt_bytes_per_token": float(x.opt_bytes_per_token),
                   "roofline_tokens_per_s": float(x.roofline_tokens_per_s), "bound_by": x.bound_by}
                  for x in roof.itertuples()],
        "fraction_of_roofline": {arm: [{"r": float(x.r), "tokens_per_s": float(x.tokens_per_s),
                                        "fraction": float(x.fraction_of_roofline)}
                                       for x in sub.sort_values("r").itertuples() if pd.notna(x.fraction_of_roofline)]
                                 for arm, sub in frac.groupby("arm")},
    }


def roofline_headline(roof: dict) -> str:
    fr = roof.get("fraction_of_roofline")
    if not fr:
        return ""
    parts = [f"{a}: {fmt(xs[-1]['fraction'], '.2f')} at r={xs[-1]['r']:g}" for a, xs in fr.items() if xs]
    return " Fraction of the roofline at the largest r: " + "; ".join(parts) + "."
