"""C2 (reference 004 §5.3, Table 6): the matched source campaign.

One model, prompt, cache policy and budget; only the source changes. P (buffered) is
judged by the prespecified admission predicate and must fail it while exact (the
reference's headline: direct ownership changes the admission outcome); every D and F
cell must be oracle-exact and admissible; F/D complete wall is the geometric mean over
the counterbalanced pairs with its 95% paired-log t interval, and F is faster only if
the interval excludes 1.
Reported beside it (no assertion): the overlap bound of each pair, max(c, io) / (c + io)
from its D cell's exposed source wait io and compute c = wall - io (the F/D a perfect
overlap reaches), their geometric mean, and F/D over the bound with its paired interval;
and the compute threads every cell ran (matched_source.threads: one core left to the
source service on a small machine, as the reference's host leaves its CPU to I/O).
Also: F/D exposed-source-wait and decode-rate ratios, physical source bytes per output
(ratio 1.0 expected), and F's lifecycle ledger (submissions = completions, peak depth
equal to its windows: every window in flight at once, dynamic allocations after start,
windows free at every close).
"""

from __future__ import annotations

import math

from residency.core.arms import ASYNC, BUFFERED, DIRECT, ORACLE, PAIRED
from residency.analysis.pairs import matched_pairs, overlap_bound, pair_records
from residency.analysis.stats import paired_log_ratio
from residency.claims.record import Assertion, ClaimResult, as_float, as_int, fmt
from residency.claims.source_depth import DEPTH_GUARANTEE

ID = "C2"
REFERENCE = ("Reference claim C2: buffered P completes exactly but reaches the 11 GiB host ceiling and records "
             "33,481 memory.max events; blocking one-window direct D and the complete eight-window asynchronous "
             "F are exact with positive margin and zero limit events; across six counterbalanced pairs F "
             "completes in 32.3% of D's wall time (geometric F/D 0.322913, 95% paired-log t interval "
             "[0.320090, 0.325762], 3.10x reciprocal), at identical physical source bytes per output (ratio 1.0); "
             "F/D exposed-source-wait ratio 0.534673, decode-rate ratio 1.541885; every F cell issues and "
             "completes 55,520 source operations at peak depth eight, zero dynamic allocation, all windows free.")
INPUTS = {"runs": "results/matched_source.parquet"}
REVISION = {
    "revision": "C2 r1 (issue 22)",
    "change": ("R_policy is the calibrated reserve R = O + margin (harness.overhead_margin), no longer a declared 16 MiB "
               "below the measured O; the weight allowance H_cap - R_policy is matched_source.ratio 0.244 x T_repr "
               "(was r = 0.5 plus F's extra windows); eq. 1 is checked before any matched cell runs (premise.py)"),
    "reason": ("with a reserve below the state a run needs beside its weights, eq. 1 failed in every cell: the model "
               "fitted in the host allowance, so the campaign did not test the reference's premise"),
    "follows": ("004 §5.3: \"The matched ownership ... experiment holds the Qwen3-Next model bytes ... 11 GiB cgroup ... "
                "fixed\" (11 GiB of a 45.08 GiB representation: 0.244); §2.1: \"R_policy an operator-declared reserve "
                "for non-target host state ... S > H_cap - R_policy\""),
}


def _cell(x) -> dict:
    return {"source_arm": x["source_arm"], "block": int(x["block"]), "order": x["order"],
            "position": int(x["position"]), "threads": as_int(x.get("threads")), "status": x["status"], "exact": x["exact"],
            "first_differing_step": as_int(x["first_differing_step"]), "admissible": x["admissible"],
            "wall_s": as_float(x["wall_s"]), "tokens_per_s": as_float(x["tokens_per_s"]),
            "exposed_source_wait_ns": as_int(x["exposed_source_wait_ns"]),
            "budget_chunks": as_int(x["budget_chunks"]), "peak_bytes": as_int(x["peak_bytes"]), "limit_bytes": as_int(x["limit_bytes"]),
            "headroom_bytes": as_int(x["headroom_bytes"]), "limit_events_total": as_int(x["limit_events_total"]),
            "oom_kills": as_int(x["oom_kills"]), "host_grade": x["host_grade"],
            "source_submissions": as_int(x["source_submissions"]), "source_completions": as_int(x["source_completions"]),
            "source_peak_depth": as_int(x["source_peak_depth"]),
            "source_windows": as_int(x["source_windows"]),
            "source_windows_free_at_close": as_int(x["source_windows_free_at_close"]),
            "source_tickets_outstanding_at_close": as_int(x["source_tickets_outstanding_at_close"]),
            "source_dynamic_allocations": as_int(x["source_dynamic_allocations"]),
            "source_physical_bytes_per_output": as_float(x["source_physical_bytes_per_output"]),
            "readahead_max_steps_ahead": as_int(x.get("readahead_max_steps_ahead")),
            "eq1_margin_bytes": as_int(x["eq1_margin_bytes"]), "run_dir": x["run_dir"]}


def _ratio(pairs, key):
    d = [p[DIRECT][key] for p in pairs]
    f = [p[ASYNC][key] for p in pairs]
    if len(pairs) < 2 or any(v is None or v <= 0 for v in d + f):
        return None
    return paired_log_ratio(d, f).as_dict()


def compute(frames, settings) -> ClaimResult:
    runs = frames["runs"].sort_values("position")
    cells = [_cell(x) for _, x in runs.iterrows()]
    pairs = [{arm: _cell(x) for arm, x in pr.items()} for pr in pair_records(matched_pairs(runs))]
    p = next((c for c in cells if c["source_arm"] == BUFFERED), None)
    insufficient = []
    if len(pairs) < 2:
        insufficient.append(f"{len(pairs)} complete D/F pairs: a paired interval needs at least 2")
    if p is None:
        insufficient.append("no P (buffered) cell")
    df = [c for c in cells if c["source_arm"] in PAIRED]
    f_cells = [c for c in cells if c["source_arm"] == ASYNC]
    wall = _ratio(pairs, "wall_s")
    bounds = [overlap_bound(pr[DIRECT]["wall_s"], pr[DIRECT]["exposed_source_wait_ns"], pr[DIRECT]["threads"])
              for pr in pairs]
    # F/D over the bound is F against D's wall scaled by its own bound: paired as F/D is.
    over_bound = (paired_log_ratio([pr[DIRECT]["wall_s"] * b for pr, b in zip(pairs, bounds)],
                                   [pr[ASYNC]["wall_s"] for pr in pairs]).as_dict()
                  if wall and all(b is not None and b > 0 for b in bounds) else None)
    bound_mean = (math.exp(sum(math.log(b) for b in bounds) / len(bounds))
                  if bounds and all(b is not None and b > 0 for b in bounds) else None)
    bpo = _ratio(pairs, "source_physical_bytes_per_output")
    values = {
        "cells": cells,
        "p": {k: p[k] for k in ("exact", "admissible", "peak_bytes", "limit_bytes", "headroom_bytes",
                                "limit_events_total", "oom_kills")} if p else None,
        "compute_threads": sorted({c["threads"] for c in cells if c["threads"] is not None}),
        "pairs": [{"block": d["block"], "order": d["order"], "d_wall_s": d["wall_s"], "f_wall_s": f["wall_s"],
                   "f_over_d": f["wall_s"] / d["wall_s"] if d["wall_s"] else None, "overlap_bound": b,
                   "f_over_d_over_bound": f["wall_s"] / d["wall_s"] / b if d["wall_s"] and b else None}
                  for (d, f), b in zip(((pr[DIRECT], pr[ASYNC]) for pr in pairs), bounds)],
        "wall_f_over_d": wall,
        "overlap_bound": bound_mean,
        "wall_f_over_d_over_overlap_bound": over_bound,
        "exposed_source_wait_f_over_d": _ratio(pairs, "exposed_source_wait_ns"),
        "decode_rate_f_over_d": _ratio(pairs, "tokens_per_s"),
        "physical_bytes_per_output_f_over_d": bpo["ratio"] if bpo else None,
        "cache_chunks": sorted({c["budget_chunks"] for c in cells if c["source_arm"] != ORACLE},
                               key=lambda v: -1 if v is None else v),
        "d_and_f_exact": [c["exact"] is True for c in df],
        "d_and_f_admissible": [c["admissible"] for c in df],
        "f_balanced": [c["source_submissions"] is not None and c["source_submissions"] == c["source_completions"]
                       and c["source_tickets_outstanding_at_close"] == 0 for c in f_cells],
        "f_peak_depth_max": max((c["source_peak_depth"] or 0 for c in f_cells), default=None),
        "f_readahead_max_steps_ahead": max((c["readahead_max_steps_ahead"] or 0 for c in f_cells), default=None),
        "f_peak_depth_equals_windows": [c["source_peak_depth"] is not None and c["source_peak_depth"] == c["source_windows"]
                                        for c in f_cells],
        "depth_guarantee": DEPTH_GUARANTEE,
        "f_no_dynamic_allocation": [c["source_dynamic_allocations"] == 0 for c in f_cells],
        "windows_free_at_every_close": [c["source_windows_free_at_close"] is not None
                                        and c["source_windows_free_at_close"] == c["source_windows"] for c in df],
        "eq1_holds": [c["eq1_margin_bytes"] is not None and c["eq1_margin_bytes"] > 0 for c in df],
    }
    values["cache_held_fixed"] = len(values["cache_chunks"]) == 1 and values["cache_chunks"][0] is not None
    if any(a is None for a in values["d_and_f_admissible"]):
        insufficient.append("a D or F cell ran without a hard host limit: admissibility cannot be judged")
    if p is not None and p["admissible"] is None:
        insufficient.append("P ran without a hard host limit: its admission outcome cannot be judged")
    tol = float(settings["c2_bytes_ratio_tolerance"])
    ob = over_bound or {}
    headline = (f"F/D complete wall {fmt(wall['ratio'] if wall else None, '.4f')} over {len(pairs)} pairs, 95% "
                f"paired-log t [{fmt(wall['low'] if wall else None, '.4f')}, {fmt(wall['high'] if wall else None, '.4f')}]"
                f" against 1; against D's overlap bound {fmt(bound_mean, '.4f')}: "
                f"{fmt(ob.get('ratio'), '.4f')} [{fmt(ob.get('low'), '.4f')}, {fmt(ob.get('high'), '.4f')}]; "
                f"compute threads {'/'.join(map(str, values['compute_threads'])) or 'n/a'}; P admissible: {values['p']['admissible'] if p else 'n/a'} "
                f"({values['p']['limit_events_total'] if p else 'n/a'} limit events); bytes/output F/D "
                f"{fmt(values['physical_bytes_per_output_f_over_d'], '.4f')}; F peak depth "
                f"{values['f_peak_depth_max']} of {max((c['source_windows'] or 0 for c in f_cells), default='n/a')} windows, "
                f"read-ahead up to {values['f_readahead_max_steps_ahead']} step(s) ahead.")
    assertions = [
        Assertion("/values/cache_held_fixed", "eq", True, why="P, D and F hold the same cache capacity (chunks)"),
        Assertion("/values/p/exact", "eq", True, why="P is oracle-exact"),
        Assertion("/values/p/admissible", "eq", False,
                  why="P fails the admission predicate (direct ownership changes the admission outcome)"),
        Assertion("/values/d_and_f_exact", "all_true", why="every D and F cell is oracle-exact"),
        Assertion("/values/d_and_f_admissible", "all_true",
                  why="every D and F cell passes the admission predicate (headroom > 0, no limit event, no OOM kill)"),
        Assertion("/values/wall_f_over_d/high", "lt", 1.0, why="F is faster than D: the 95% interval excludes 1"),
        Assertion("/values/physical_bytes_per_output_f_over_d", "approx", 1.0, tolerance=tol,
                  why="D and F read the same physical source bytes per output"),
        Assertion("/values/f_balanced", "all_true", why="F: submissions = completions, no ticket outstanding"),
        Assertion("/values/f_peak_depth_equals_windows", "all_true",
                  why="F: peak in-flight depth equal to its windows (every window in flight at once)"),
        Assertion("/values/f_no_dynamic_allocation", "all_true", why="F: no dynamic allocation on the read path"),
        Assertion("/values/windows_free_at_every_close", "all_true", why="every window free at every close"),
        Assertion("/values/eq1_holds", "all_true", why="eq. 1: managed bytes exceed the host cap minus the reserve"),
    ]
    return ClaimResult(headline, values, assertions, insufficient)
