"""What the task claims (C5, C6, C11) read from results/tasks.parquet: each task's cells
(its oracle, its controls, its candidate), one arm's values against another's, and the
rule that picks C6's control.

The oracle is the resident path (kernel-mmap, no host limit): the exactness oracle every
other cell is compared with at gather time. The controls and the candidate run under one
hard host limit, r * T_repr + O (reference 004 A.2, A.4: control and candidate under the
same hard 6 GiB cap); a control is compared with the candidate only under that premise.
"""

from __future__ import annotations

import math

from residency.claims.record import as_float, as_int
from residency.evidence import resource

ORACLE, CANDIDATE = "oracle", "candidate"
C6_RULE = ("the fastest exact control, a rule fixed before the runs: among the tasks.controls arms whose every task "
           "run finished ok with its tokens and every logit row equal to the oracle's (the exactness contract), the "
           "one with the lowest total wall time (a tie: the first in tasks.controls)")


def runs(t) -> dict:
    """{task: {"oracle": row, "candidate": row, "controls": {arm: row}}} (a cell missing
    from the table is absent from its task's entry)."""
    out: dict = {}
    for _, r in t.iterrows():
        cells = out.setdefault(str(r["task"]), {"controls": {}})
        if r["role"] == "control":
            cells["controls"][str(r["arm"])] = r
        else:
            cells[str(r["role"])] = r
    return dict(sorted(out.items()))


def control_arms(t) -> list[str]:
    """The control arms in tasks.controls order (their control_index)."""
    c = t[t["role"] == "control"]
    return list(dict.fromkeys(c.sort_values("control_index", kind="stable")["arm"].astype(str)))


def column(by_task: dict, which: str) -> dict:
    """{task: row or None} of one cell: "oracle", "candidate" or a control's arm."""
    return {k: (v.get(which) if which in (ORACLE, CANDIDATE) else v["controls"].get(which)) for k, v in by_task.items()}


def unfit(rows: dict, label: str) -> list[str]:
    """Why a cell's runs cannot be scored: a task without the run, a run that did not finish."""
    reasons = []
    for task, row in rows.items():
        if row is None:
            reasons.append(f"task {task}: no {label} run")
        elif row["status"] != "ok" or as_float(row["f1"]) is None:
            reasons.append(f"task {task} {label}: status {row['status']}"
                           + (f" ({row['error']})" if row["error"] else "") + ", no answer scored")
    return reasons


def aggregate(values: list) -> float | None:
    """Mean F1 over tasks (None when a value is missing)."""
    vals = [as_float(v) for v in values]
    if not vals or any(v is None for v in vals):
        return None
    return math.fsum(vals) / len(vals)


def _total(xs: list) -> float | None:
    return math.fsum(xs) if xs and None not in xs else None


def resource_ok(row) -> bool | None:
    """The resource predicate (evidence/resource.py) of one run, from its table columns."""
    return None if row is None else resource.admissible(resource.HostCounters.of_row(row))


def exact(row) -> bool | None:
    """The exactness contract of one capped run: tokens and every logit row equal the oracle's."""
    if row is None or row["tokens_equal_oracle"] is None or row["logits_equal_oracle"] is None:
        return None
    return bool(row["tokens_equal_oracle"]) and bool(row["logits_equal_oracle"])


def arm_summary(rows: dict) -> dict:
    """One capped cell over the tasks: arm, exactness, walls, host limits and outcomes."""
    present = [r for r in rows.values() if r is not None]
    walls = [as_float(r["wall_s"]) if r is not None else None for r in rows.values()]
    ex = [exact(r) for r in rows.values()]
    return {"arm": str(present[0]["arm"]) if present else None,
            "complete": bool(present) and len(present) == len(rows) and all(r["status"] == "ok" for r in present),
            "exact": ex, "exact_all": all(x is True for x in ex) if ex else None,
            "wall_s": walls, "total_wall_s": _total(walls),
            "host_grade": sorted({str(r["host_grade"]) for r in present}),
            "limit_bytes": [as_int(r["limit_bytes"]) if r is not None else None for r in rows.values()],
            "limit_events": [as_int(r["limit_events"]) if r is not None else None for r in rows.values()],
            "resource_ok": [resource_ok(r) for r in rows.values()]}


def fastest_exact(summaries: dict) -> str | None:
    """C6_RULE over {arm: arm_summary} in tasks.controls order (None: no control is exact)."""
    ok = [(s["total_wall_s"], i, arm) for i, (arm, s) in enumerate(summaries.items())
          if s["complete"] and s["exact_all"] and s["total_wall_s"] is not None]
    return min(ok)[2] if ok else None


def same_cap(control: dict, candidate: dict) -> list[str]:
    """Why a control did not run under the candidate's own hard limit, task by task ([]: it did)."""
    reasons = []
    for task, (c, k) in zip(control["tasks"], zip(control["limit_bytes"], candidate["limit_bytes"])):
        if c is None or k is None or c != k:
            reasons.append(f"task {task}: control {control['arm']} limit {c} bytes, candidate limit {k} bytes "
                           "(the premise: one hard limit r x T_repr + O)")
    grades = set(control["host_grade"]) | set(candidate["host_grade"])
    if grades != {"hard"}:
        reasons.append(f"the control and the candidate need a hard host limit (grades here: {sorted(grades)}): "
                       "without it the control is not nonresident under the candidate's cap")
    return reasons


def versus(by_task: dict, control_arm: str) -> tuple[dict, list[str]]:
    """The candidate against one control, task by task: F1, answers, exactness against the
    oracle, walls (a cycle is one task run: the complete process, request to teardown), and
    the reasons the comparison is unfit."""
    tasks = list(by_task)
    ctrl_rows, cand_rows, oracle_rows = (column(by_task, w) for w in (control_arm, CANDIDATE, ORACLE))
    ctrl = {"tasks": tasks, **arm_summary(ctrl_rows)}
    cand = {"tasks": tasks, **arm_summary(cand_rows)}
    insufficient = unfit(ctrl_rows, f"control {control_arm}") + unfit(cand_rows, "candidate")
    if not insufficient:
        insufficient += same_cap(ctrl, cand)
    f1c = [as_float(r["f1"]) if r is not None else None for r in ctrl_rows.values()]
    f1k = [as_float(r["f1"]) if r is not None else None for r in cand_rows.values()]
    fc, fk = aggregate(f1c), aggregate(f1k)
    wc, wk = ctrl["wall_s"], cand["wall_s"]
    tc, tk = ctrl["total_wall_s"], cand["total_wall_s"]
    first = next((r for r in cand_rows.values() if r is not None), None)
    v = {
        "tasks": tasks, "n": len(tasks),
        "candidate_arm": cand["arm"], "candidate_r": as_float(first["r"]) if first is not None else None,
        "control_arm": control_arm,
        "oracle": "kernel-mmap, resident, no host limit: the exactness oracle of every task run",
        "f1_control": f1c, "f1_candidate": f1k,
        "aggregate_f1_control": fc, "aggregate_f1_candidate": fk,
        "aggregate_f1_delta": (fk - fc) if fc is not None and fk is not None else None,
        "task_f1_equal": [a is not None and a == b for a, b in zip(f1c, f1k)],
        "answers": {i: {"reference": _get(oracle_rows[i] if oracle_rows[i] is not None else cand_rows[i], "reference"),
                        "oracle": _get(oracle_rows[i], "answer"), "control": _get(ctrl_rows[i], "answer"),
                        "candidate": _get(cand_rows[i], "answer")} for i in tasks},
        "tokens_identical": [None if r is None or r["tokens_equal_oracle"] is None else bool(r["tokens_equal_oracle"])
                             for r in cand_rows.values()],
        "exact": {"candidate": cand["exact"], "control": ctrl["exact"]},
        "host": {"candidate": {k: cand[k] for k in ("host_grade", "limit_bytes", "limit_events", "resource_ok")},
                 "control": {k: ctrl[k] for k in ("host_grade", "limit_bytes", "limit_events", "resource_ok")}},
        "cycle": {"control_wall_s": wc, "candidate_wall_s": wk,
                  "candidate_over_control": [k / c if c and k is not None else None for c, k in zip(wc, wk)],
                  # a task direction is favourable when the candidate's cycle is the shorter
                  "favourable_against_a_nonresident_control": [None if c is None or k is None else k < c
                                                               for c, k in zip(wc, wk)],
                  "total_control_wall_s": tc, "total_candidate_wall_s": tk,
                  "total_candidate_over_control": tk / tc if tc and tk is not None else None},
    }
    v["tokens_identical_count"] = sum(1 for x in v["tokens_identical"] if x is True)
    if not tasks:
        insufficient.append("results/tasks.parquet has no runs")
    return v, insufficient


def _get(row, key):
    return None if row is None else row[key]
