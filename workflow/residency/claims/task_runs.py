"""What the task claims (C5, C6, C11) read from results/tasks.parquet: the pairs of a
control and a candidate run per task, and the aggregate F1 of each arm."""

from __future__ import annotations

import math

from .record import as_float


def pairs(t):
    """{task: (control row, candidate row)} for every task with both runs, and the reasons
    the evidence is unfit (a task without both runs, a run that did not finish)."""
    insufficient, out = [], {}
    for task, g in t.groupby("task", sort=True):
        roles = {r: g[g["role"] == r] for r in ("control", "candidate")}
        if any(len(v) != 1 for v in roles.values()):
            insufficient.append(f"task {task}: {len(roles['control'])} control and {len(roles['candidate'])} "
                                f"candidate runs (one of each expected)")
            continue
        out[task] = (roles["control"].iloc[0], roles["candidate"].iloc[0])
    if t.empty:
        insufficient.append("results/tasks.parquet has no runs")
    for task, (c, k) in out.items():
        for row in (c, k):
            if row["status"] != "ok" or as_float(row["f1"]) is None:
                insufficient.append(f"task {task} {row['role']}: status {row['status']}"
                                    + (f" ({row['error']})" if row["error"] else "") + ", no answer scored")
    return out, insufficient


def aggregate(values: list) -> float | None:
    """Mean F1 over tasks (None when a value is missing)."""
    vals = [as_float(v) for v in values]
    if not vals or any(v is None for v in vals):
        return None
    return math.fsum(vals) / len(vals)


def common_values(t) -> tuple[dict, list[str], dict]:
    """Per-task values both claims report, the reasons evidence is unfit, and the pairs."""
    p, insufficient = pairs(t)
    tasks = sorted(p)
    ctrl = [as_float(p[i][0]["f1"]) for i in tasks]
    cand = [as_float(p[i][1]["f1"]) for i in tasks]
    f_ctrl, f_cand = aggregate(ctrl), aggregate(cand)
    walls_c = [as_float(p[i][0]["wall_s"]) for i in tasks]
    walls_k = [as_float(p[i][1]["wall_s"]) for i in tasks]
    ratios = [k / c if c and k is not None else None for c, k in zip(walls_c, walls_k)]
    v = {
        "tasks": tasks,
        "n": len(tasks),
        "candidate_arm": str(p[tasks[0]][1]["arm"]) if tasks else None,
        "candidate_r": as_float(p[tasks[0]][1]["r"]) if tasks else None,
        "f1_control": ctrl,
        "f1_candidate": cand,
        "aggregate_f1_control": f_ctrl,
        "aggregate_f1_candidate": f_cand,
        "aggregate_f1_delta": (f_cand - f_ctrl) if f_ctrl is not None and f_cand is not None else None,
        "task_f1_equal": [a is not None and a == b for a, b in zip(ctrl, cand)],
        "answers": {i: {"reference": p[i][0]["reference"], "control": p[i][0]["answer"],
                        "candidate": p[i][1]["answer"]} for i in tasks},
        "tokens_identical": [bool(p[i][1]["tokens_equal_control"]) if p[i][1]["tokens_equal_control"] is not None
                             else None for i in tasks],
        "cycle": {"control_wall_s": walls_c, "candidate_wall_s": walls_k, "candidate_over_control": ratios,
                  "total_control_wall_s": math.fsum(walls_c) if tasks and None not in walls_c else None,
                  "total_candidate_wall_s": math.fsum(walls_k) if tasks and None not in walls_k else None},
    }
    tc, tk = v["cycle"]["total_control_wall_s"], v["cycle"]["total_candidate_wall_s"]
    v["cycle"]["total_candidate_over_control"] = tk / tc if tc and tk is not None else None
    v["tokens_identical_count"] = sum(1 for x in v["tokens_identical"] if x is True)
    return v, insufficient, p
