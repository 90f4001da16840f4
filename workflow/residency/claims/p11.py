"""P11 (the reference's correctness result): pager load against mmap load is exact.

Every run, in every arm and cell, produces byte-identical generated token ids and every
complete logit row equal, byte for byte, to the oracle (the unconstrained plain-mmap
baseline of the same build and settings).
"""

from __future__ import annotations

from ..arms import KERNEL_MMAP
from . import model_runs as mr
from .record import Assertion, ClaimResult, as_float, as_int

ID = "P11"
REFERENCE = ("Reference correctness result: byte-identical token sequences, mmap load vs residctl load, 32 "
             "tokens; the userfaultfd pager serves correct weight data for a real transformer.")
INPUTS = {"runs": mr.MODEL_RUNS}


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"].sort_values(["campaign", "arm", "r", "rep"], na_position="first")
    insufficient = [] if len(runs) else [f"no runs in {mr.MODEL_RUNS}"]
    if not (runs["campaign"] == "baseline").any():
        insufficient.append("no unconstrained baseline (the oracle) was run")
    cells = [{"campaign": x["campaign"], "arm": x["arm"], "r": as_float(x["r"]), "rep": int(x["rep"]),
              "status": x["status"], "exact": x["exact"], "tokens_equal": x["tokens_equal"],
              "logits_equal": x["logits_equal"], "first_differing_step": as_int(x["first_differing_step"]),
              "detail": x["exactness_detail"], "tokens": as_int(x["tokens"]),
              "interposed": x["interposed"], "repack_disabled": x["repack_disabled"],
              "run_dir": x["run_dir"]} for _, x in runs.iterrows()]
    pager = [c for c in cells if c["arm"] != KERNEL_MMAP]
    values = {
        "cells": cells,
        "runs": len(cells),
        "exact": [c["exact"] is True for c in cells],
        "pager_mapping_interposed": [c["interposed"] is True for c in pager],
        "repacking_disabled": [c["repack_disabled"] is True for c in cells],
        "oracle": runs[runs["campaign"] == "baseline"]["oracle_run_dir"].iloc[0]
        if (runs["campaign"] == "baseline").any() else None,
        "logit_rows_compared_per_run": cells[0]["tokens"] if cells else None,
    }
    n_exact = sum(values["exact"])
    headline = (f"{n_exact} of {len(cells)} runs (all arms and cells, baselines included) produced byte-identical "
                f"tokens and all {values['logit_rows_compared_per_run']} logit rows against the oracle.")
    assertions = [
        Assertion("/values/pager_mapping_interposed", "all_true",
                  why="llama.cpp's model mapping was the pager's region in every pager run"),
        Assertion("/values/repacking_disabled", "all_true", why="all arms ran the same kernels on the same bytes"),
        Assertion("/values/exact", "all_true", why="tokens and every logit row byte-identical to the oracle"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
