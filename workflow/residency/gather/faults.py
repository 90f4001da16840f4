"""The fault campaign's Parquet tables: results/faults.parquet (one row per fault cell, its
validators' outcome; claim C3, Table 7) and results/faults_reset_warm.parquet (the reset/warm
cell; claim C12). Both are made again from the run directories by `verify --deep`.

A cell's facts are what its run recorded (run.json, harness.json, its output files) and how
its outputs compare: the control with its adapter's oracle (kernel-mmap, same build), each
recoverable cell with the control. The final cache state is the set of chunks resident
after the trace's last event (fills add, evictions remove), a digest of the sorted chunks.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from residency.evidence import fault_validators
from residency.core import trace as trace_mod
from residency.evidence.exactness import compare, relation
from residency.gather import base
from residency.gather.base import common_row, load_record, write

SOURCE_IDENTITY = ("engine", "windows", "depth", "window_bytes", "alignment")


def final_cache_sha256(run_dir: Path) -> str | None:
    """Digest of the chunks resident after the trace's last event (None without a trace)."""
    p = run_dir / "trace.bin"
    if not p.exists():
        return None
    rec = trace_mod.read(p).records
    resident: set[int] = set()
    for kind, chunk in zip(rec["kind"].tolist(), rec["chunk"].tolist()):
        if kind in (trace_mod.FILL_DEMAND, trace_mod.FILL_PREFETCH):
            resident.add(chunk)
        elif kind == trace_mod.EVICT:
            resident.discard(chunk)
    return hashlib.sha256(np.array(sorted(resident), dtype="<u4").tobytes()).hexdigest()


def source_identity(run: dict) -> dict:
    s = run.get("source_stats") or {}
    return {"source_sha256": (run.get("identity") or {}).get("source_sha256"),
            **{k: s.get(k) for k in SOURCE_IDENTITY}}


def _logit_rows(run_dir: Path, run: dict) -> int:
    p, n_vocab = run_dir / "logits.f32", (run.get("model") or {}).get("n_vocab")
    return p.stat().st_size // (4 * n_vocab) if p.exists() and n_vocab else 0


def _exact(run_dir: Path, ref_dir: Path, run: dict, ref: dict, full: bool) -> dict:
    """Each compared term: equal (bool), over the terms the cell's class compares."""
    terms = {k: t["equal"] for k, t in relation(run_dir, ref_dir)["terms"].items()}
    if full:
        terms["source_identity"] = source_identity(run) == source_identity(ref)
        a, b = final_cache_sha256(run_dir), final_cache_sha256(ref_dir)
        terms["final_cache"] = a is not None and a == b
    return terms


def facts(run_dir: Path, ref_dir: Path | None) -> tuple[dict, dict]:
    """(facts the validators read, the common run row) of one cell; `ref_dir`: the run its
    outputs must equal (the oracle for the control, the control otherwise; None: fatal)."""
    row, run, meta = common_row(run_dir)
    cell = meta["cell"]
    cls = meta["class"]
    f = {"cell": cell, "class": cls, "status": row["status"], "fault": run.get("fault"),
         **base.predicate_values(row),
         "rejection": run.get("rejection"), "plan": run.get("plan") or {}, "source": run.get("source_stats") or {},
         "tokens": (run.get("generation") or {}).get("tokens") or 0, "has_tokens_file": (run_dir / "tokens.json").exists(),
         "logit_rows": _logit_rows(run_dir, run), "content_mismatches": row["content_mismatches"], "exact": None}
    if ref_dir is not None and row["status"] == "ok":
        f["exact"] = _exact(run_dir, ref_dir, run, load_record(ref_dir / "run.json") or {}, cls == "recoverable")
    return f, {**row, "identity": run.get("identity") or {}, "at": (run.get("fault") or {}).get("at")}


def _ref(run_dir: Path, cls: str) -> Path | None:
    if cls == "fatal":
        return None
    return run_dir.parent / ("oracle" if cls == "control" else "none")


def fault_row(run_dir: Path, prespecified: bool, rank: int) -> dict:
    harness = json.loads((run_dir / "harness.json").read_text())
    meta, gpu, auth = harness["meta"], harness.get("gpu") or {}, harness["host"].get("authority") or {}
    f, row = facts(run_dir, _ref(run_dir, meta["class"]))
    checks = fault_validators.checks(f)
    valid, reasons = fault_validators.verdict(checks)
    ident = row["identity"]
    x = f["fault"] or {}
    return {"adapter": meta["adapter"], "adapter_rank": rank, "cell": f["cell"], "class": f["class"], "prespecified": prespecified,
            "at": row["at"], "status": f["status"], "error": row["error"], "fired": checks["fired"],
            "tokens": f["tokens"], "logit_rows": f["logit_rows"],
            "rejection_kind": (f["rejection"] or {}).get("kind"),
            "bundle_chunks_published": (f["rejection"] or {}).get("bundle_chunks_published"),
            "reordered": x.get("reordered"), "reuse_refusals": x.get("reuse_refusals"),
            "outstanding_at_reset": x.get("outstanding_at_reset"), "shutdown_refusal": x.get("shutdown_refusal"),
            "windows_free_at_close": f["source"].get("windows_free_at_close"), "windows": f["source"].get("windows"),
            "windows_retained": fault_validators.windows_retained(f["plan"]),
            "inflight_at_close": f["source"].get("inflight_at_close"),
            **base.predicate_values(row),
            "swap_off": bool(auth.get("swap_off_by") or auth.get("swap_total_bytes") == 0),
            "gpu_grade": gpu.get("grade"), "foreign_compute_processes": gpu.get("foreign_compute_processes"),
            **{f"{k}_sha256": ident.get(f"{k}_sha256") for k in ("engine", "adapter", "source", "plan", "pager")},
            "checks_json": json.dumps(checks, sort_keys=True), "valid": valid, "reasons": "; ".join(reasons) or None,
            "run_dir": str(run_dir), "manifest_sha256": row["manifest_sha256"],
            "config_digest": row["config_digest"]}


# The table's columns, declared: a column that is null in every run keeps its type.
FAULTS_SCHEMA = pa.schema([
    ("adapter", pa.string()),
    ("adapter_rank", pa.int64()),
    ("cell", pa.string()),
    ("class", pa.string()),
    ("prespecified", pa.bool_()),
    ("at", pa.int64()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("fired", pa.bool_()),
    ("tokens", pa.int64()),
    ("logit_rows", pa.int64()),
    ("rejection_kind", pa.string()),
    ("bundle_chunks_published", pa.int64()),
    ("reordered", pa.int64()),
    ("reuse_refusals", pa.int64()),
    ("outstanding_at_reset", pa.int64()),
    ("shutdown_refusal", pa.string()),
    ("windows_free_at_close", pa.int64()),
    ("windows", pa.int64()),
    ("windows_retained", pa.int64()),
    ("inflight_at_close", pa.int64()),
] + base.PREDICATE_COLUMNS + [
    ("swap_off", pa.bool_()),
    ("gpu_grade", pa.string()),
    ("foreign_compute_processes", pa.int64()),
    ("engine_sha256", pa.string()),
    ("adapter_sha256", pa.string()),
    ("source_sha256", pa.string()),
    ("plan_sha256", pa.string()),
    ("pager_sha256", pa.string()),
    ("checks_json", pa.string()),
    ("valid", pa.bool_()),
    ("reasons", pa.string()),
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),
    ("config_digest", pa.string()),
])


def faults_table(lin: dict) -> pa.Table:
    pre = {tuple(p) for p in lin["prespecified"]}
    order = lin["adapters"]
    rows = []
    for d in lin["run_dirs"]:
        p = Path(d)
        rows.append(fault_row(p, (p.parent.name, p.name) in pre, order.index(p.parent.name)))
    return base.to_table(rows, FAULTS_SCHEMA)


def gather_faults(run_dirs: list[str | os.PathLike], prespecified: list[list[str]], out: str) -> pa.Table:
    """Write results/faults.parquet: the fault cells' run directories (oracles are not rows:
    they are what the controls are compared with), C3's prespecified (adapter, cell) pairs,
    the first adapter's first (its order is the adapters' order: adapter_rank)."""
    adapters = list(dict.fromkeys(a for a, _ in prespecified))
    adapters += sorted({Path(d).parent.name for d in run_dirs} - set(adapters))
    lin = {"kind": "gather", "study": "faults", "run_dirs": sorted(map(str, run_dirs)),
           "prespecified": sorted(map(list, prespecified)), "adapters": adapters}
    return write(lin, out, faults_table)


def faults_command(run_dirs, out, prespecified) -> pa.Table:
    """`residency gather faults` (campaigns/studies.py): --prespecified is JSON."""
    return gather_faults(run_dirs, json.loads(prespecified), out)


def warm_row(run_dir: Path, oracle_dir: Path) -> dict:
    row, run, _ = common_row(run_dir)
    oracle = json.loads((oracle_dir / "tokens.json").read_text())["tokens"]
    want = hashlib.sha256(json.dumps(oracle).encode()).hexdigest()
    reqs = run.get("requests") or []
    plan = run.get("plan") or {}
    tickets, consumers = plan.get("tickets") or {}, plan.get("consumers") or {}
    by_kind = {r.get("kind"): r for r in reqs}
    out = {"status": row["status"], "error": row["error"], "requests": len(reqs), "resets": plan.get("resets"),
           "oracle_tokens_sha256": want, "plan_shutdown": plan.get("shutdown"),
           "plan_balanced": plan.get("balanced"), "tickets_balanced": tickets.get("balanced"),
           "consumers_balanced": consumers.get("balanced"),
           "slots_vacant_at_close": plan.get("slots_vacant_at_close"), "slots": plan.get("slots"),
           "windows_free_at_close": plan.get("windows_free_at_close"), "windows": plan.get("windows"),
           **base.predicate_values(row), "gpu_grade": (json.loads((run_dir / "harness.json").read_text()).get("gpu") or {}).get("grade"),
           "engine_sha256": row["engine_sha256"], "run_dir": str(run_dir), "oracle_run_dir": str(oracle_dir),
           "manifest_sha256": row["manifest_sha256"]}
    cmp = compare(run_dir, oracle_dir)
    out["primary_logits_equal_oracle"] = cmp.logits_equal if row["status"] == "ok" else None
    p, w = (by_kind.get(k, {}).get("logits_sha256") for k in ("primary", "warm"))
    out["warm_logits_equal_primary"] = (p == w) if p and w else None
    for kind in ("primary", "warm"):
        r = by_kind.get(kind) or {}
        toks = r.get("tokens")
        out[f"{kind}_tokens_equal_oracle"] = (toks == oracle) if toks is not None else None
        out[f"{kind}_logits_sha256"] = r.get("logits_sha256")
        out[f"{kind}_physical_bytes_read"] = r.get("physical_bytes_read")
        out[f"{kind}_misses"] = r.get("misses")
    return out


def gather_reset_warm(run_dir: str, oracle_dir: str, out: str) -> pa.Table:
    lin = {"kind": "gather", "study": "reset-warm", "run_dirs": [str(run_dir)], "oracle": str(oracle_dir)}
    return write(lin, out, reset_warm_table)


def reset_warm_command(run_dirs, out, oracle) -> pa.Table:
    """`residency gather reset-warm` (campaigns/studies.py): the warm run is the first."""
    return gather_reset_warm(run_dirs[0], oracle, out)


# The table's columns, declared: a column that is null in every run keeps its type.
RESET_WARM_SCHEMA = pa.schema([
    ("status", pa.string()),
    ("error", pa.string()),
    ("requests", pa.int64()),
    ("resets", pa.int64()),
    ("oracle_tokens_sha256", pa.string()),
    ("plan_shutdown", pa.string()),
    ("plan_balanced", pa.bool_()),
    ("tickets_balanced", pa.bool_()),
    ("consumers_balanced", pa.bool_()),
    ("slots_vacant_at_close", pa.int64()),
    ("slots", pa.int64()),
    ("windows_free_at_close", pa.int64()),
    ("windows", pa.int64()),
] + base.PREDICATE_COLUMNS + [
    ("gpu_grade", pa.string()),
    ("engine_sha256", pa.string()),
    ("run_dir", pa.string()),
    ("oracle_run_dir", pa.string()),
    ("manifest_sha256", pa.string()),
    ("primary_logits_equal_oracle", pa.bool_()),
    ("warm_logits_equal_primary", pa.bool_()),
    ("primary_tokens_equal_oracle", pa.bool_()),
    ("primary_logits_sha256", pa.string()),
    ("primary_physical_bytes_read", pa.int64()),
    ("primary_misses", pa.int64()),
    ("warm_tokens_equal_oracle", pa.bool_()),
    ("warm_logits_sha256", pa.string()),
    ("warm_physical_bytes_read", pa.int64()),
    ("warm_misses", pa.int64()),
])


def reset_warm_table(lin: dict) -> pa.Table:
    return base.to_table([warm_row(Path(d), Path(lin["oracle"])) for d in lin["run_dirs"]], RESET_WARM_SCHEMA)

