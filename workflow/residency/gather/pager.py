"""Gather of the pager studies: pager-synthetic, pager-model and matched-source.

One typed Parquet row per run (gather_base.common_row and the study's own columns); the
model studies compare every cell with the oracle cell (exactness.compare).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from residency.gather import base
from residency.core.arms import KERNEL_MMAP
from residency.gather.base import HOST_COLUMNS, PROVENANCE_COLUMNS, RUN_COLUMNS, reads_run
from residency.core.identity import sha256_file
from residency.evidence import resource

PAGER_SYNTHETIC_SCHEMA = pa.schema(RUN_COLUMNS[:5] + [
    ("threads", pa.int32()),
    ("compute_us", pa.int32()),
    ("signal", pa.string()),
    ("sync", pa.string()),                # step (a barrier per chunk step) | none (free-running threads)
    ("jitter_us", pa.int32()),            # most extra compute per thread and step (seeded)
] + RUN_COLUMNS[5:10] + [
    ("region_bytes", pa.int64()),         # T_repr of the synthetic region
    ("passes", pa.int32()),
] + RUN_COLUMNS[10:20] + [
    ("accesses_after_cold", pa.int64()),  # accesses in passes 2.. (from the trace)
    ("misses_after_cold", pa.int64()),
] + RUN_COLUMNS[20:] + [
    ("bytes_verified", pa.int64()),
    ("verify_errors", pa.int64()),
] + HOST_COLUMNS + [
    ("region_sha256", pa.string()),
    ("llama_commit", pa.string()),        # of the llama.cpp build the engine links (the scan uses none of it)
] + PROVENANCE_COLUMNS)

PAGER_MODEL_SCHEMA = pa.schema(RUN_COLUMNS + [
    ("model", pa.string()),
    ("model_sha256", pa.string()),
    ("model_bytes", pa.int64()),          # file size
    ("t_repr_bytes", pa.int64()),         # tensor payload bytes (the budget's denominator)
    ("n_layer", pa.int32()),
    ("n_vocab", pa.int64()),
    ("n_expert", pa.int32()),
    ("objects", pa.int64()),
    ("steps_per_pass", pa.int64()),
    # Oversize steps (docs/run-contract.md "Budget"): a step whose chunks exceed fit_chunks
    # runs with per-thread pins instead of consumers, and what it leaves resident follows the
    # compute threads' fault order; P2 judges determinism only where no step ran oversize.
    ("fit_chunks", pa.int64()),           # the largest step held whole (null: arm A)
    ("oversize_steps", pa.int64()),       # steps run oversize (embd's per-pass rows included)
    ("oversize_objects", pa.list_(pa.string())),         # the objects other than embd larger than fit_chunks
    ("oversize_object_chunks", pa.list_(pa.int64())),    # each one's chunks (objects.json), same order
    # The consumption signal (--consumption): `tensor` lets chunks go inside their step once
    # the last node reading every tensor over them ran; how often it did.
    ("consumption", pa.string()),         # object | tensor (null: arm A, no pager)
    ("releases", pa.int64()),             # release nodes reached
    ("chunks_let_go_early", pa.int64()),  # chunks let go before their step ended
    ("prompt_tokens", pa.int32()),
    ("tokens", pa.int32()),               # generated tokens
    ("passes", pa.int32()),               # prefill + decode passes
    ("layer_transitions", pa.int64()),    # n_layer * generated tokens
    ("physical_bytes_per_token", pa.float64()),
    ("prefill_ns", pa.int64()),
    ("decode_ns", pa.int64()),
    ("tokens_per_s", pa.float64()),       # decoded tokens / decode wall time
    ("token_p99_ns", pa.int64()),         # p99 of a decode token's time (generation.token_latency_ns)
    ("repack_disabled", pa.bool_()),
    ("interposed", pa.bool_()),           # llama.cpp's model mapping was the pager's region
    ("llama_commit", pa.string()),
    ("exact", pa.bool_()),                # tokens and every logit row byte-identical to the oracle
    ("tokens_equal", pa.bool_()),
    ("logits_equal", pa.bool_()),
    ("first_differing_step", pa.int64()),
    ("exactness_detail", pa.string()),
    ("oracle_run_dir", pa.string()),
    ("logits_sha256", pa.string()),
    ("valid", pa.bool_()),                # status ok and exact: a run that counts
] + HOST_COLUMNS + PROVENANCE_COLUMNS)


@reads_run
def pager_synthetic_row(run_dir: Path, region_sha256: str | None) -> dict:
    """One row of results/pager_synthetic.parquet from a run directory."""
    from residency.core import trace as trace_mod

    row, run, meta = base.common_row(run_dir)
    acc_after = miss_after = None
    if (run_dir / "trace.bin").exists():
        tr = trace_mod.read(run_dir / "trace.bin")
        acc = tr.accesses
        after = acc["step"] >= tr.chunks
        acc_after = int(after.sum())
        miss_after = int(((acc["flags"] & trace_mod.FLAG_MISS) != 0)[after].sum())
    counters = run.get("counters", {})
    row.update({
        "threads": int(meta.get("threads", 1)),
        "compute_us": int(meta.get("compute_us", 0)),
        "signal": meta.get("signal"),
        # what ran (run.json's config), else what the cell asked for; older runs: lockstep
        "sync": run.get("config", {}).get("sync") or meta.get("sync") or "step",
        "jitter_us": int(run.get("config", {}).get("jitter_us", meta.get("jitter_us", 0))),
        "region_bytes": base.to_int(run.get("region", {}).get("bytes")),
        "passes": base.to_int(run.get("config", {}).get("passes")),
        "accesses_after_cold": acc_after,
        "misses_after_cold": miss_after,
        "bytes_verified": base.to_int(counters.get("bytes_verified")),
        "verify_errors": base.to_int(counters.get("verify_errors")),
        "region_sha256": region_sha256,
    })
    return row


def pager_synthetic_table(run_dirs: list[str], region: dict, llama: dict | None = None) -> pa.Table:
    rows = [pager_synthetic_row(Path(d), region["sha256"]) for d in run_dirs]
    base.stamp_llama(rows, llama, commit=True)
    return base.to_table(rows, PAGER_SYNTHETIC_SCHEMA)


def gather_pager_synthetic(run_dirs: list[str | os.PathLike], region_identity: str | os.PathLike,
                           out: str | os.PathLike, llama_identity: str | os.PathLike | None = None) -> pa.Table:
    """Write results/pager_synthetic.parquet from the given run directories."""
    return base.write({"study": "pager-synthetic", "run_dirs": sorted(map(str, run_dirs)),
                       "identity": json.loads(Path(region_identity).read_text()), "oracle": None,
                       "llama": base.llama_record(llama_identity)}, out, pager_synthetic_from)


def _consumption(run: dict) -> dict:
    """The consumption signal a pager run used (arm A has none: nulls)."""
    sa = run.get("signal_audit") or {}
    if run.get("arm") == KERNEL_MMAP or "consumption" not in sa:
        return {"consumption": None, "releases": None, "chunks_let_go_early": None}
    return {"consumption": sa["consumption"], "releases": base.to_int(sa.get("releases")),
            "chunks_let_go_early": base.to_int(sa.get("chunks_let_go_early"))}


def _object_chunks(run_dir: Path, names: list[str] | None) -> list[int] | None:
    """The chunk count of each named object, from the run's objects.json (the steps the
    engine declared); None when the run recorded no names or no manifest of objects."""
    objs = base.load_record(run_dir / "objects.json") if names is not None else None
    if objs is None:
        return None
    size = {o["name"]: len(o["chunks"]) for o in objs.get("objects", [])}
    return [base.to_int(size.get(n)) for n in names]


@reads_run
def pager_model_row(run_dir: Path, model_identity: dict, oracle_dir: Path) -> dict:
    """One row of results/pager_model.parquet, compared with the oracle run."""
    from residency.evidence.exactness import compare

    row, run, meta = base.common_row(run_dir)
    model = run.get("model", {})
    gen = run.get("generation", {})
    llama = run.get("llama", {})
    tokens = base.to_int(gen.get("tokens"))
    n_layer = base.to_int(model.get("n_layer"))
    phys = row["physical_bytes_read"]
    budget = run.get("budget", {})
    over = budget.get("oversize_objects")
    cmp = compare(run_dir, oracle_dir) if (oracle_dir / "tokens.json").exists() else None
    logits = run_dir / "logits.f32"
    row.update({
        "model": model_identity.get("name") or Path(model_identity["path"]).stem,
        "model_sha256": model_identity["sha256"],
        "model_bytes": base.to_int(model.get("bytes")),
        "t_repr_bytes": base.to_int(meta.get("t_repr_bytes")),
        "n_layer": n_layer,
        "n_vocab": base.to_int(model.get("n_vocab")),
        "n_expert": base.to_int(model.get("n_expert")),
        "objects": base.to_int(run.get("objects")),
        "steps_per_pass": base.to_int(run.get("steps_per_pass")),
        "fit_chunks": base.to_int(budget.get("fit_chunks")),
        "oversize_steps": base.to_int(run.get("counters", {}).get("oversize_steps")),
        "oversize_objects": list(over) if over is not None else None,
        "oversize_object_chunks": _object_chunks(run_dir, over),
        **_consumption(run),
        "prompt_tokens": base.to_int(gen.get("prompt_tokens")),
        "tokens": tokens,
        "passes": base.to_int(gen.get("passes")),
        "layer_transitions": n_layer * tokens if n_layer is not None and tokens is not None else None,
        "physical_bytes_per_token": (phys / tokens) if phys is not None and tokens else None,
        "prefill_ns": base.to_int(gen.get("prefill_ns")),
        "decode_ns": base.to_int(gen.get("decode_ns")),
        "tokens_per_s": gen.get("tokens_per_s"),
        "token_p99_ns": base.to_int((gen.get("token_latency_ns") or {}).get("p99")),
        "repack_disabled": llama.get("repack_disabled"),
        "interposed": (run.get("mapping") or {}).get("interposed"),
        "llama_commit": llama.get("commit"),
        "exact": cmp.exact if cmp else None,
        "tokens_equal": cmp.tokens_equal if cmp else None,
        "logits_equal": cmp.logits_equal if cmp else None,
        "first_differing_step": cmp.first_differing_step if cmp else None,
        "exactness_detail": (cmp.detail or None) if cmp else "no oracle run to compare with",
        "oracle_run_dir": str(oracle_dir),
        "logits_sha256": sha256_file(logits) if logits.exists() else None,
    })
    row["valid"] = bool(row["status"] == "ok" and row["exact"])
    return row


def pager_model_table(run_dirs: list[str], ident: dict, oracle_dir: str, llama: dict | None = None) -> pa.Table:
    rows = [pager_model_row(Path(d), ident, Path(oracle_dir)) for d in run_dirs]
    base.stamp_llama(rows, llama)
    return base.to_table(rows, PAGER_MODEL_SCHEMA)


def gather_pager_model(run_dirs: list[str | os.PathLike], oracle_dir: str | os.PathLike,
                       model_identity: str | os.PathLike, out: str | os.PathLike,
                       llama_identity: str | os.PathLike | None = None) -> pa.Table:
    """Write results/pager_model.parquet; every run is compared with `oracle_dir`."""
    return base.write({"study": "pager-model", "run_dirs": sorted(map(str, run_dirs)),
                       "identity": json.loads(Path(model_identity).read_text()), "oracle": str(oracle_dir),
                       "llama": base.llama_record(llama_identity)}, out, pager_model_from)


def pager_model_command(run_dirs, out, oracle, model_identity, llama_identity=None) -> pa.Table:
    """`residency gather pager-model` (campaigns/studies.py)."""
    return gather_pager_model(run_dirs, oracle, model_identity, out, llama_identity)


MATCHED_SOURCE_SCHEMA = pa.schema(list(PAGER_MODEL_SCHEMA) + [
    ("source_arm", pa.string()),              # oracle | P | D | F
    ("block", pa.int32()),                    # pair number (0 for the oracle and P)
    ("order", pa.string()),                   # D-F or F-D within the block
    ("position", pa.int32()),                 # execution order of the campaign
    ("wall_s", pa.float64()),                 # complete process wall time (the harness)
    ("threads", pa.int32()),                  # compute threads the engine ran (run.json llama.threads)
    ("exposed_source_wait_ns", pa.int64()),   # compute threads blocked in weight faults
    ("source_submissions", pa.int64()),
    ("source_completions", pa.int64()),
    ("source_peak_depth", pa.int64()),
    ("source_windows", pa.int64()),
    ("source_windows_free_at_close", pa.int64()),
    ("source_tickets_outstanding_at_close", pa.int64()),
    ("source_dynamic_allocations", pa.int64()),
    ("source_rejections", pa.int64()),
    ("source_physical_bytes", pa.int64()),
    ("source_logical_bytes", pa.int64()),
    ("source_padding_bytes", pa.int64()),
    ("source_read_ns", pa.int64()),           # time inside the source's reads (D: the blocking preads)
    ("source_physical_bytes_per_output", pa.float64()),
    ("readahead_max_steps_ahead", pa.int64()),  # F: most steps ahead a read-ahead bundle was read for
    ("headroom_bytes", pa.int64()),           # limit - peak
    ("limit_events_total", pa.int64()),       # limit events + (v1) vmpressure events
    ("reserve_bytes", pa.int64()),            # R_policy
    ("eq1_managed_bytes", pa.int64()),        # S (T_repr)
    ("eq1_cap_minus_reserve", pa.int64()),    # H_cap - R_policy
    ("eq1_margin_bytes", pa.int64()),         # S - (H_cap - R_policy); eq. 1 holds when > 0
])


SOURCE_STATS = ("submissions", "completions", "peak_depth", "windows", "windows_free_at_close",
                "tickets_outstanding_at_close", "dynamic_allocations", "rejections", "physical_bytes",
                "logical_bytes", "padding_bytes", "read_ns")


@reads_run
def matched_source_row(run_dir: Path, model_identity: dict, oracle_dir: Path) -> dict:
    row = pager_model_row(run_dir, model_identity, oracle_dir)
    harness = json.loads((run_dir / "harness.json").read_text())
    meta = harness["meta"]
    run = base.load_record(run_dir / "run.json") or {}
    src = run.get("source_stats") or {}
    tokens = row["tokens"]
    host = resource.HostCounters.of_row(row)
    reserve = base.to_int(meta.get("reserve_bytes"))
    row.update({f"source_{k}": base.to_int(src.get(k)) for k in SOURCE_STATS})
    row.update({
        "source_arm": meta.get("source_arm"),
        "block": int(meta.get("block", 0)),
        "order": meta.get("order") or None,
        "position": int(meta.get("position", 0)),
        "wall_s": float(harness["wall_s"]),
        "threads": base.to_int((run.get("llama") or {}).get("threads")),
        "exposed_source_wait_ns": base.to_int(run.get("counters", {}).get("exposed_source_wait_ns")),
        "readahead_max_steps_ahead": base.to_int((run.get("readahead") or {}).get("max_steps_ahead")),
        "source_physical_bytes_per_output": (src["physical_bytes"] / tokens)
        if src.get("physical_bytes") is not None and tokens else None,
        "headroom_bytes": resource.headroom_bytes(host),
        "limit_events_total": resource.limit_events_total(host),
        "reserve_bytes": reserve,
        "eq1_managed_bytes": row["t_repr_bytes"],
    })
    if row["limit_bytes"] is not None and reserve is not None and row["t_repr_bytes"] is not None:
        row["eq1_cap_minus_reserve"] = row["limit_bytes"] - reserve
        row["eq1_margin_bytes"] = row["t_repr_bytes"] - row["eq1_cap_minus_reserve"]
    else:
        row["eq1_cap_minus_reserve"] = row["eq1_margin_bytes"] = None
    return row


def matched_source_table(run_dirs: list[str], ident: dict, oracle_dir: str, llama: dict | None = None) -> pa.Table:
    rows = [matched_source_row(Path(d), ident, Path(oracle_dir)) for d in run_dirs]
    base.stamp_llama(rows, llama)
    rows.sort(key=lambda r: r["position"])
    return base.to_table(rows, MATCHED_SOURCE_SCHEMA)


def gather_matched_source(run_dirs, oracle_dir, model_identity, out, llama_identity=None) -> pa.Table:
    """Write results/matched_source.parquet; every cell is compared with the oracle cell."""
    return base.write({"study": "matched-source", "run_dirs": list(map(str, run_dirs)),
                       "identity": json.loads(Path(model_identity).read_text()), "oracle": str(oracle_dir),
                       "llama": base.llama_record(llama_identity)}, out, matched_source_from)


def matched_source_command(run_dirs, out, oracle, model_identity, llama_identity=None) -> pa.Table:
    """`residency gather matched-source` (campaigns/studies.py)."""
    return gather_matched_source(run_dirs, oracle, model_identity, out, llama_identity)


# The table a gather lineage describes (gather_base.write; verify --deep through gather_studies).
def pager_synthetic_from(lin: dict) -> pa.Table:
    return pager_synthetic_table(lin["run_dirs"], lin["identity"], lin.get("llama"))


def pager_model_from(lin: dict) -> pa.Table:
    return pager_model_table(lin["run_dirs"], lin["identity"], lin["oracle"], lin.get("llama"))


def matched_source_from(lin: dict) -> pa.Table:
    return matched_source_table(lin["run_dirs"], lin["identity"], lin["oracle"], lin.get("llama"))
