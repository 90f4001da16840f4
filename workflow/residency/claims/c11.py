"""C11 (reference 004 Appendix B): the task-admission stop, from results/tasks.parquet.

The placement is the candidate (a pager arm at r * T_repr under the hard host limit
r * T_repr + O). It passes the resource predicate when every candidate run ran under a
hard limit with its peak below the limit, zero limit (and pressure) events and zero OOM
kills. The prespecified admission criterion (config claims, fixed before the runs): a task
is correct when the candidate's F1 is at least claims.c11_f1_threshold; the line is
admitted when at least ceil(claims.c11_required_fraction x n) tasks are correct (1.0:
k = n, the reference's 4 of 4), else stopped.

The record asserts the reference's statement: resources passed AND admission "stop".
So a pass means "reproduced the stop": component success was insufficient because the
next prospective criterion failed. An admitted line (enough tasks correct) makes the
record fail, and a resource miss makes it fail as well; both stay results.
"""

from __future__ import annotations

import math

from residency.claims.record import Assertion, ClaimResult, as_float
from residency.claims.task_runs import CANDIDATE, column, resource_ok, runs, unfit

ID = "C11"
REFERENCE = ("Reference claim C11 (Appendix B): the published 24,119,299,040-byte Llama-3.3-70B IQ2_M artifact was "
             "reconstructed exactly; CPU placement of token embedding and all 80 GQA-V projections produced a "
             "23,432 MiB GPU peak with 685 MiB margin, but only one of four untouched tasks passed; the 4/4 "
             "admission criterion stopped the planned 8,192+512 economics cell. Not reproduced here: Llama-3.3-70B, "
             "the GPU placement and its margin; the placement is a pager arm under a hard host limit on the primary "
             "model and this project's seeded tasks, CPU only.")
INPUTS = {"tasks": "results/tasks.parquet"}


def compute(frames, settings) -> ClaimResult:
    rows = column(runs(frames["tasks"]), CANDIDATE)
    insufficient = unfit(rows, "candidate") or ([] if rows else ["results/tasks.parquet has no runs"])
    tasks = [i for i, r in rows.items() if r is not None]
    cand = [rows[i] for i in tasks]
    thr, frac = float(settings["c11_f1_threshold"]), float(settings["c11_required_fraction"])
    f1 = [as_float(r["f1"]) for r in cand]
    ok = [resource_ok(r) for r in cand]
    n = len(tasks)
    k = math.ceil(frac * n - 1e-9) if n else None
    correct = sum(1 for x in f1 if x is not None and x >= thr)
    scored = n > 0 and None not in f1
    v = {
        "tasks": tasks, "n": n,
        "candidate_arm": str(cand[0]["arm"]) if cand else None,
        "candidate_r": as_float(cand[0]["r"]) if cand else None,
        "host_grade": sorted({str(r["host_grade"]) for r in cand}),
        "resource_ok": ok,
        "peak_bytes": [r["peak_bytes"] for r in cand], "limit_bytes": [r["limit_bytes"] for r in cand],
        "limit_events": [r["limit_events"] for r in cand], "oom_kills": [r["oom_kills"] for r in cand],
        "resources_passed": (all(ok) if None not in ok else None) if ok else None,
        "f1_threshold": thr, "required_fraction": frac, "required_correct": k,
        "f1_candidate": f1,
        "task_correct": [x is not None and x >= thr for x in f1],
        "correct": correct if scored else None,
        "admission": ("admit" if correct >= k else "stop") if scored else None,
    }
    if ok and None in ok:
        insufficient.append(f"the resource predicate needs a hard host limit; grades here: {v['host_grade']}")
    headline = (f"Placement {v['candidate_arm']} at r={v['candidate_r']}: resources passed {v['resources_passed']}; "
                f"{v['correct']} of {n} tasks correct (F1 >= {thr}), {k} required: admission {v['admission']}.")
    assertions = [
        Assertion("/values/resources_passed", "eq", True,
                  why="every candidate run under a hard limit: peak below it, zero limit events, zero OOM kills"),
        Assertion("/values/admission", "eq", "stop",
                  why="the reference's stop: the prespecified k-of-n task criterion failed although resources passed "
                      "(pass = the stop reproduced; an admitted line fails this record)"),
    ]
    return ClaimResult(headline, v, assertions, insufficient)
