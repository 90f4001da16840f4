"""P8 (reference claim 8): LRU thrashes on the real model.

Arm C reads about the whole model per generated token at every budget ratio, 0.75
included, and handles at least as many demand faults as there are layer transitions.
"""

from __future__ import annotations

from residency.core.arms import PAGER_LRU
from residency.claims import model_runs as mr
from residency.claims.record import Assertion, ClaimResult, as_float, as_int, fmt

ID = "P8"
REFERENCE = ("Reference claim 8: the cyclic-scan degeneration happens on a real 3B model through llama.cpp + "
             "userfaultfd: arm C reads 134-144 GB per 64 tokens at every ratio including 0.75, with "
             "absent_handled 2561-2817 against 2304 layer transitions (a chunk evicted mid-scan re-faults).")
INPUTS = {"runs": mr.MODEL_RUNS}


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"]
    c = mr.main_runs(runs, PAGER_LRU).sort_values(["r", "rep"])
    insufficient = mr.missing_cells(runs, [PAGER_LRU])
    low = float(settings["p8_whole_model_min_fraction"])
    cells = []
    for _, x in c.iterrows():
        per_token = as_float(x["physical_bytes_per_token"])
        t = as_int(x["t_repr_bytes"])
        cells.append({"r": as_float(x["r"]), "rep": int(x["rep"]), "valid": bool(x["valid"]),
                      "physical_bytes_read": as_int(x["physical_bytes_read"]),
                      "bytes_per_token_over_t_repr": per_token / t if per_token is not None and t else None,
                      "demand_faults": as_int(x["demand_fills"]), "faults_handled": as_int(x["faults_handled"]),
                      "layer_transitions": as_int(x["layer_transitions"]), "run_dir": x["run_dir"]})
    fr = [x["bytes_per_token_over_t_repr"] for x in cells if x["bytes_per_token_over_t_repr"] is not None]
    values = {
        "cells": cells,
        "runs_valid": [x["valid"] for x in cells],
        "whole_model_per_token": [x["bytes_per_token_over_t_repr"] is not None and x["bytes_per_token_over_t_repr"] >= low
                                  for x in cells],
        "faults_at_least_layer_transitions": [x["demand_faults"] is not None and x["layer_transitions"] is not None
                                              and x["demand_faults"] >= x["layer_transitions"] for x in cells],
        "bytes_per_token_over_t_repr_min": min(fr) if fr else None,
        "bytes_per_token_over_t_repr_max": max(fr) if fr else None,
    }
    headline = (f"Arm C read {fmt(values['bytes_per_token_over_t_repr_min'], '.2f')}-"
                f"{fmt(values['bytes_per_token_over_t_repr_max'], '.2f')} x the model's tensor bytes per token "
                f"over {len(cells)} runs; demand faults "
                f"{min((x['demand_faults'] for x in cells if x['demand_faults'] is not None), default='n/a')}-"
                f"{max((x['demand_faults'] for x in cells if x['demand_faults'] is not None), default='n/a')} against "
                f"{cells[0]['layer_transitions'] if cells else 'n/a'} layer transitions.")
    assertions = [
        Assertion("/values/runs_valid", "all_true", why="every C run completed and was exact"),
        Assertion("/values/whole_model_per_token", "all_true",
                  why=f"C reads at least {low} x the model per token at every r"),
        Assertion("/values/faults_at_least_layer_transitions", "all_true",
                  why="C handles at least as many demand faults as layer transitions"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
