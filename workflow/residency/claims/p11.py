"""P11 (the reference's correctness result): pager load against mmap load is exact.

Every run, in every arm and cell, produces byte-identical generated token ids and every
complete logit row equal, byte for byte, to the oracle (the unconstrained plain-mmap
baseline of the same build and settings). The run that is the oracle is not compared with
itself: it is reported (`oracle`) and left out of the runs counted exact.
"""

from __future__ import annotations

import os

from residency.core.arms import KERNEL_MMAP
from residency.claims import model_runs as mr
from residency.claims.record import Assertion, ClaimResult, as_float, as_int

ID = "P11"
REFERENCE = ("Reference correctness result: byte-identical token sequences, mmap load vs residctl load, 32 "
             "tokens; the userfaultfd pager serves correct weight data for a real transformer.")
INPUTS = {"runs": mr.MODEL_RUNS}


def same_dir(a, b) -> bool:
    """Whether two recorded run directories name the same directory."""
    return a is not None and b is not None and os.path.normpath(str(a)) == os.path.normpath(str(b))


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"].sort_values(["campaign", "arm", "r", "rep"], na_position="first")
    is_oracle = [same_dir(a, b) for a, b in zip(runs["run_dir"], runs["oracle_run_dir"])]
    oracle_dirs = sorted({str(o) for o in runs["oracle_run_dir"].dropna()})
    compared = runs[[not o for o in is_oracle]]
    insufficient = [] if len(compared) else [f"no runs besides the oracle in {mr.MODEL_RUNS}"]
    if not (runs["campaign"] == "baseline").any() or not any(is_oracle):
        insufficient.append("no unconstrained baseline run that is the oracle")
    if len(oracle_dirs) > 1:
        insufficient.append(f"runs were compared with {len(oracle_dirs)} different oracles")
    cells = [{"campaign": x["campaign"], "arm": x["arm"], "r": as_float(x["r"]), "rep": int(x["rep"]),
              "status": x["status"], "exact": x["exact"], "tokens_equal": x["tokens_equal"],
              "logits_equal": x["logits_equal"], "first_differing_step": as_int(x["first_differing_step"]),
              "detail": x["exactness_detail"], "tokens": as_int(x["tokens"]),
              "interposed": x["interposed"], "repack_disabled": x["repack_disabled"],
              "run_dir": x["run_dir"]} for _, x in compared.iterrows()]
    pager = [c for c in cells if c["arm"] != KERNEL_MMAP]
    values = {
        "cells": cells,
        "runs": len(cells),
        "exact": [c["exact"] is True for c in cells],
        "pager_mapping_interposed": [c["interposed"] is True for c in pager],
        "repacking_disabled": [c["repack_disabled"] is True for c in cells]
        + [x is True for x in runs[is_oracle]["repack_disabled"]],
        "oracle": oracle_dirs[0] if len(oracle_dirs) == 1 else None,
        "oracle_excluded": int(sum(is_oracle)),
        "logit_rows_compared_per_run": cells[0]["tokens"] if cells else None,
    }
    n_exact = sum(values["exact"])
    headline = (f"{n_exact} of {len(cells)} runs (all arms and cells, the other baselines included; the oracle "
                f"itself not counted) produced byte-identical tokens and all "
                f"{values['logit_rows_compared_per_run']} logit rows against the oracle.")
    assertions = [
        Assertion("/values/pager_mapping_interposed", "all_true",
                  why="llama.cpp's model mapping was the pager's region in every pager run"),
        Assertion("/values/repacking_disabled", "all_true", why="all arms ran the same kernels on the same bytes"),
        Assertion("/values/exact", "all_true", why="tokens and every logit row byte-identical to the oracle"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
