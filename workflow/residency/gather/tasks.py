"""Gather the utility tasks (claims C5, C6, C11): one row of results/tasks.parquet per run.

A row is one cell of a task: its oracle (kernel-mmap, resident, no host limit), a control
(tasks.controls, under the candidate's hard limit r * T_repr + O) or its candidate (a pager
arm under the same limit): the answer the run gave (its response.txt up to the first line
break), the task's reference span and the token F1 between them, the generated tokens, the
complete process wall time (the harness's), the host observations of its cgroup (grade,
limit, peak, limit and pressure events, OOM kills, and the resource predicate of them)
and, for every cell but the oracle, whether its tokens and logit rows equal the oracle's
(the exactness contract). The tasks are made
again from the seed and count the lineage records, so `residency verify --deep` gathers
the same table.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from residency.campaigns import tasks as tasks_mod
from residency.evidence import resource
from residency.gather.base import common_row, to_int, write

TASKS_SCHEMA = pa.schema([
    ("task", pa.string()),                # t00, t01, ...
    ("kind", pa.string()),                # place | person | count: what the question asks for
    ("role", pa.string()),                # oracle | control | candidate
    ("arm", pa.string()),
    ("control_index", pa.int32()),        # a control's place in tasks.controls (0: the established control)
    ("r", pa.float64()),                  # the budget ratio of a capped cell (null: the oracle)
    ("status", pa.string()),
    ("error", pa.string()),
    ("reference", pa.string()),           # the task's answer span
    ("answer", pa.string()),              # the run's generated text up to its first line break
    ("response", pa.string()),            # the whole generated text
    ("f1", pa.float64()),                 # token F1 of answer against reference (null: the run did not finish)
    ("exact_match", pa.bool_()),
    ("tokens", pa.int32()),               # generated tokens
    ("prompt_tokens", pa.int32()),
    ("tokens_sha256", pa.string()),       # of tokens.json's token list
    ("tokens_equal_oracle", pa.bool_()),  # tokens equal the task's oracle's (null for the oracle)
    ("logits_equal_oracle", pa.bool_()),  # every logit row byte-equal the oracle's
    ("wall_s", pa.float64()),             # complete process wall time (the harness)
    ("wall_ns", pa.int64()),              # the engine's own wall time
    ("budget_bytes", pa.int64()),
    ("physical_bytes_read", pa.int64()),
    ("host_grade", pa.string()),          # hard | instrumented | unenforced
    ("limit_bytes", pa.int64()),
    ("peak_bytes", pa.int64()),
    ("headroom_bytes", pa.int64()),       # limit - peak
    ("limit_events", pa.int64()),
    ("pressure_events", pa.int64()),
    ("oom_kills", pa.int64()),
    ("admissible", pa.bool_()),           # the resource predicate (evidence/resource.py) of the columns above
    ("model", pa.string()),
    ("model_sha256", pa.string()),
    ("engine_sha256", pa.string()),
    ("config_digest", pa.string()),
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),
])


def _tokens(run_dir: Path) -> list | None:
    try:
        return json.loads((run_dir / "tokens.json").read_text())["tokens"]
    except (OSError, ValueError, KeyError):
        return None


def task_row(run_dir: Path, task: dict, model_identity: dict, oracle_dir: Path | None) -> dict:
    from residency.evidence.exactness import compare
    from residency.core.identity import digest

    common, run, meta = common_row(run_dir)
    harness = json.loads((run_dir / "harness.json").read_text())
    gen = run.get("generation", {})
    resp_path = run_dir / "response.txt"
    response = resp_path.read_text(errors="replace") if resp_path.exists() else None
    ok = common["status"] == "ok" and response is not None
    answer = tasks_mod.answer_of(response) if ok else None
    toks = _tokens(run_dir)
    cmp = compare(run_dir, oracle_dir) if oracle_dir is not None and (oracle_dir / "tokens.json").exists() else None
    row = {k: common[k] for k in ("arm", "r", "status", "error", "wall_ns", "budget_bytes", "physical_bytes_read",
                                  "host_grade", "limit_bytes", "peak_bytes", "limit_events", "pressure_events",
                                  "oom_kills", "admissible", "engine_sha256", "config_digest", "run_dir", "manifest_sha256")}
    row.update({
        "task": task["id"], "kind": task["kind"], "role": meta.get("role"),
        "control_index": to_int(meta.get("control_index")),
        "reference": task["answer"], "answer": answer, "response": response,
        "f1": tasks_mod.f1(answer, task["answer"]) if ok else None,
        "exact_match": tasks_mod.exact_match(answer, task["answer"]) if ok else None,
        "tokens": to_int(gen.get("tokens")), "prompt_tokens": to_int(gen.get("prompt_tokens")),
        "tokens_sha256": digest(toks) if toks is not None else None,
        "tokens_equal_oracle": cmp.tokens_equal if cmp else None,
        "logits_equal_oracle": cmp.logits_equal if cmp else None,
        "wall_s": float(harness["wall_s"]) if harness.get("wall_s") is not None else None,
        "headroom_bytes": resource.headroom_bytes(resource.HostCounters.of_row(common)),
        "model": model_identity.get("name") or Path(model_identity["path"]).stem,
        "model_sha256": model_identity["sha256"],
    })
    return row


def tasks_table(lin: dict) -> pa.Table:
    by_id = {t["id"]: t for t in tasks_mod.generate(lin["seed"], lin["n"])}
    rows = []
    for d in lin["run_dirs"]:
        p = Path(d)
        oracle = p.parent / tasks_mod.ORACLE if p.name != tasks_mod.ORACLE else None
        rows.append(task_row(p, by_id[p.parent.name], lin["identity"], oracle))
    roles = tasks_mod.ROLES
    rows.sort(key=lambda r: (r["task"], roles.index(r["role"]) if r["role"] in roles else 9,
                             -1 if r["control_index"] is None else r["control_index"]))
    return pa.Table.from_pylist(rows, schema=TASKS_SCHEMA)


def gather_tasks(run_dirs: list[str | os.PathLike], seed: int, n: int, model_identity: str | os.PathLike,
                 out: str | os.PathLike) -> pa.Table:
    """Write results/tasks.parquet from the task runs (every cell but the oracle compared
    with its task's oracle, its sibling directory)."""
    return write({"study": "tasks", "run_dirs": sorted(map(str, run_dirs)), "seed": int(seed), "n": int(n),
                  "identity": json.loads(Path(model_identity).read_text())}, out, tasks_table)


def tasks_command(run_dirs, out, tasks, model_identity) -> pa.Table:
    """`residency gather tasks` (campaigns/studies.py): --tasks is JSON {"seed": S, "n": N}."""
    spec = json.loads(tasks)
    return gather_tasks(run_dirs, spec["seed"], spec["n"], model_identity, out)
