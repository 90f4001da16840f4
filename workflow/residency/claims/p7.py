"""P7 (reference claim 7): D against the Belady bound on the real model.

OPT is recomputed from each D run's own workload-authored reference trace (prefill plus
every decode pass) at the pager's capacity. D/OPT must be at least 1 (OPT is a floor: a
value below 1 means the trace or the capacity is wrong) and at most the reference's
upper value; the record reports D/OPT per r, and, to say what holds D back, D against
MIN under the pager's own constraint that a step's chunks stay resident while the step
computes (belady.step_held_min_misses), and against MIN holding only the tensor being read,
over the step's reads in compute order (tensor_reference.py: the floor of a tensor-granular
consumption signal, pager_model.consumption tensor): references, not part of the verdict.
"""

from __future__ import annotations

from residency.core.arms import PAGER_DECLARED
from residency.claims import model_runs as mr
from residency.claims.record import Assertion, ClaimResult, as_float, as_int, fmt

ID = "P7"
REFERENCE = ("Reference claim 7: D/OPT = 1.08-1.13 on the real model (65-pass Belady bound over the "
             "workload-authored reference trace), and exactly 1.00 on the synthetic workload.")
INPUTS = {"opt": mr.MODEL_OPT}


def _per_r(by_r: dict) -> list[dict]:
    return [{"r": r, "mean": sum(v) / len(v), "max": max(v)} for r, v in sorted(by_r.items())]


def compute(frames, settings) -> ClaimResult:
    opt = frames["opt"]
    d = opt[(opt["arm"] == PAGER_DECLARED) & (opt["campaign"] == "main")].sort_values(["r", "rep"])
    insufficient = [] if not d.empty else ["no arm D runs of the real-model study"]
    cells = [{"r": as_float(x["r"]), "rep": int(x["rep"]), "valid": bool(x["valid"]),
              "capacity_chunks": as_int(x["capacity_chunks"]), "misses": as_int(x["misses"]),
              "opt_misses": as_int(x["opt_misses"]), "d_over_opt": as_float(x["d_over_opt"]),
              "step_held_min_misses": as_int(x["step_held_min_misses"]),
              "d_over_step_held_min": as_float(x["d_over_step_held_min"]),
              "tensor_held_min_misses": as_int(x.get("tensor_held_min_misses")),
              "d_over_tensor_held_min": as_float(x.get("d_over_tensor_held_min")),
              "run_dir": x["run_dir"]} for _, x in d.iterrows()]
    for c in cells:
        if c["opt_misses"] is None:
            insufficient.append(f"{c['run_dir']}: no OPT (trace missing)")
    top = float(settings["p7_max_d_over_opt"])
    per_r, held_r, tensor_r = ({} for _ in range(3))
    for c in cells:
        for key, into in (("d_over_opt", per_r), ("d_over_step_held_min", held_r), ("d_over_tensor_held_min", tensor_r)):
            if c[key] is not None:
                into.setdefault(c["r"], []).append(c[key])
    values = {
        "cells": cells,
        "d_over_opt_per_r": _per_r(per_r),
        "d_over_step_held_min_per_r": _per_r(held_r),
        "d_over_tensor_held_min_per_r": _per_r(tensor_r),
        "runs_valid": [c["valid"] for c in cells],
        "opt_is_a_floor": [c["d_over_opt"] is not None and c["d_over_opt"] >= 1.0 for c in cells],
        "within_reference_gap": [c["d_over_opt"] is not None and c["d_over_opt"] <= top for c in cells],
        "max_d_over_opt_allowed": top,
    }
    headline = "D/OPT on the real model per r: " + ", ".join(
        f"{x['r']:g}: {fmt(x['mean'])}" for x in values["d_over_opt_per_r"]) + \
        "; D against MIN holding each step's chunks while it computes: " + ", ".join(
        f"{x['r']:g}: {fmt(x['mean'])}" for x in values["d_over_step_held_min_per_r"]) + \
        ("; D against MIN holding only the tensor being read: " + ", ".join(
            f"{x['r']:g}: {fmt(x['mean'])}" for x in values["d_over_tensor_held_min_per_r"])
         if values["d_over_tensor_held_min_per_r"] else "") + "."
    assertions = [
        Assertion("/values/runs_valid", "all_true", why="every D run completed and was exact"),
        Assertion("/values/opt_is_a_floor", "all_true", why="D/OPT >= 1 (OPT is a lower bound)"),
        Assertion("/values/within_reference_gap", "all_true", why=f"D/OPT <= {top} at every r"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
