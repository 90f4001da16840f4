"""Gather: run directories -> one typed Parquet row per run.

A row joins what the engine counted (`run.json`), what the kernel said about the run's
cgroup (`harness.json`), the trace digest, and the identities (engine sha256, region or
model sha256, config digest), so any number in a figure leads back here, then to the run
directory (`run_dir`), then to the engine counter of the same name.

Every row carries the sha256 of its run's `manifest.json` (`manifest_sha256`), and gather
checks every file of the run against that manifest first: a run changed after it was
recorded stops the gather with one line naming the file. A run directory without a
manifest is incomplete (the harness never finished recording it): it is gathered with
status `incomplete`, `manifest_sha256` null and the reason in `error`, so no claim counts
it as a run that completed. Each table records how it was made (its lineage: the study,
the run directories, the identity and oracle) so `residency verify --deep` can gather it
again and compare.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pyarrow as pa

from . import atomic, lineage, manifest
from .arms import KERNEL_MMAP, PAGER_LETTER as ARM_LETTER
from .identity import sha256_file

# Columns every study shares, in order. Units are in the names.
RUN_COLUMNS = [
    ("campaign", pa.string()),            # main | stress | baseline
    ("arm", pa.string()),                 # code name (kernel-mmap, pager-lru, ...)
    ("arm_letter", pa.string()),          # reference letter (A, C, D, E)
    ("r", pa.float64()),                  # budget ratio (null for an unconstrained baseline)
    ("rep", pa.int32()),
    ("status", pa.string()),              # ok | failed | oom-killed | killed-*
    ("error", pa.string()),
    ("policy", pa.string()),
    ("source_engine", pa.string()),
    ("uffd_mode", pa.string()),
    ("chunk_bytes", pa.int64()),
    ("chunks", pa.int64()),
    ("budget_bytes", pa.int64()),         # r * T_repr
    ("window_bytes", pa.int64()),
    ("page_table_bytes", pa.int64()),     # paid by the pager out of its budget
    ("budget_chunks", pa.int64()),        # the pager's capacity after paying for its own memory
    ("steps", pa.int64()),
    ("accesses", pa.int64()),
    ("hits", pa.int64()),
    ("misses", pa.int64()),
    ("miss_rate", pa.float64()),          # misses / accesses
    ("demand_fills", pa.int64()),
    ("prefetch_fills", pa.int64()),
    ("prefetch_used", pa.int64()),
    ("evictions", pa.int64()),
    ("faults_handled", pa.int64()),
    ("spurious_faults", pa.int64()),
    ("signals", pa.int64()),
    ("logical_bytes_read", pa.int64()),
    ("physical_bytes_read", pa.int64()),
    ("max_resident_chunks", pa.int64()),
    ("reconcile_checks", pa.int64()),
    ("reconcile_mismatches", pa.int64()),
    ("fault_p50_ns", pa.int64()),
    ("fault_p99_ns", pa.int64()),         # every exposed wait (a demand fault, a wait on a prefetch in flight)
    ("demand_fault_p99_ns", pa.int64()),  # the faults that read their own chunk: a demand fault's service time
    ("fill_p50_ns", pa.int64()),
    ("wall_ns", pa.int64()),
    ("trace_records", pa.int64()),
    ("trace_sha256", pa.string()),
]
HOST_COLUMNS = [
    ("host_grade", pa.string()),          # hard | instrumented | unenforced
    ("cgroup_version", pa.int32()),
    ("limit_bytes", pa.int64()),          # r * T_repr + overhead
    ("overhead_bytes", pa.int64()),       # calibrated non-weight overhead O
    ("peak_bytes", pa.int64()),           # the cgroup's high-water mark
    ("limit_events", pa.int64()),         # v2 memory.events max / v1 memory.failcnt
    ("pressure_events", pa.int64()),      # v1 vmpressure reclaim events (null on v2)
    ("oom_kills", pa.int64()),
    ("engine_sha256", pa.string()),
    ("config_digest", pa.string()),
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),     # sha256 of run_dir/manifest.json (null: incomplete run)
]
# What the run was made with beyond its config, and what its fills were checked against.
PROVENANCE_COLUMNS = [
    ("llama_build_sha256", pa.string()),  # the llama.cpp build the engine links (llama_build.build_digest)
    ("content_checks", pa.int64()),       # pager fills checked against the content digests (0: check off)
    ("content_check_ns", pa.int64()),     # time spent hashing them
    ("content_mismatches", pa.int64()),   # a mismatch fails the run closed
]

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


class GatherError(ValueError):
    """A run record (run.json, harness.json, objects.json) gather cannot read, or a value of
    one that does not fit its table's column: one line naming the run directory."""


# What reading a malformed record raises (a list where an object was, a missing key, text
# where a number was, a value too big for its column).
_MALFORMED = (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError, ValueError, AttributeError,
              OverflowError)


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _reads_run(fn):
    """A reader of one run directory (its first argument): a malformed record is GatherError.
    A missing harness.json (FileNotFoundError), a run changed after it was recorded
    (manifest.ManifestError) and a malformed trace.bin (trace.TraceError) stay what they are."""
    @functools.wraps(fn)
    def read(run_dir, *args, **kwargs):
        from .trace import TraceError

        try:
            return fn(run_dir, *args, **kwargs)
        except (GatherError, TraceError, manifest.ManifestError, FileNotFoundError):
            raise
        except _MALFORMED as exc:
            raise GatherError(f"{run_dir}: a run record gather cannot read ({_one_line(exc)})") from None
    return read


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """The rows as a table; a value that does not fit its column is GatherError."""
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        dirs = ", ".join(str(r.get("run_dir")) for r in rows[:3]) + (", ..." if len(rows) > 3 else "")
        raise GatherError(f"a run record's value does not fit its column ({_one_line(exc)}; runs {dirs})") from None


def _load(path: Path) -> dict | None:
    """A run record's object; None when the file is absent (GatherError when it is no object)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    if not isinstance(doc, dict):
        raise GatherError(f"{path}: not a JSON object (a {type(doc).__name__})")
    return doc


def _int(v):
    return None if v is None else int(v)


def _manifest(run_dir: Path) -> tuple[str | None, dict | None]:
    """(manifest sha256, entries) after checking the run's files; (None, None) if incomplete."""
    try:
        return manifest.verified(run_dir)
    except manifest.ManifestMissing:
        return None, None


def _file_sha256(run_dir: Path, listed: dict | None, name: str) -> str | None:
    """A file's sha256: from the checked manifest, else hashed here; None if absent."""
    if listed is not None:
        return (listed.get(name) or {}).get("sha256")
    return sha256_file(run_dir / name) if (run_dir / name).exists() else None


def _status(harness: dict, run: dict, manifest_sha: str | None) -> tuple[str, str | None]:
    """(status, error) of a run: the engine's word where it finished, else the harness's."""
    status = run.get("status") if harness["status"] in ("ok", "failed") and run else harness["status"]
    error = run.get("error")
    if not run:
        error = error or f"no run.json: {harness['status']}; stderr: {' | '.join(harness.get('stderr_tail', []))}"
    engine_manifest = harness.get("engine_manifest", "ok")
    if engine_manifest.startswith("mismatch"):
        status, error = "failed", f"the run directory changed before the harness recorded it: {engine_manifest}"
    if manifest_sha is None:
        status, error = "incomplete", f"no manifest.json: the run directory is incomplete; {error or status}"
    return status, error


@_reads_run
def _common(run_dir: Path) -> tuple[dict, dict, dict]:
    """(row of RUN_COLUMNS + HOST_COLUMNS, run.json, harness meta) of a run directory."""
    harness = _load(run_dir / "harness.json")
    if harness is None:
        raise FileNotFoundError(f"{run_dir}: no harness.json (the run was never recorded)")
    manifest_sha, listed = _manifest(run_dir)
    meta = harness["meta"]
    run = _load(run_dir / "run.json") or {}
    counters = run.get("counters", {})
    lat = run.get("latency_ns", {})
    region = run.get("region", {})
    budget = run.get("budget", {})
    host = harness["host"]
    cg = host.get("cgroup") or {}
    status, error = _status(harness, run, manifest_sha)
    accesses, misses = counters.get("accesses"), counters.get("misses")
    row = {
        "campaign": meta.get("campaign"),
        "arm": meta.get("arm"),
        "arm_letter": ARM_LETTER.get(meta.get("arm"), "?"),
        "r": float(meta["r"]) if meta.get("r") not in (None, "") else None,
        "rep": int(meta.get("rep", 0)),
        "status": status,
        "error": error,
        "policy": run.get("policy"),
        "source_engine": run.get("source_engine"),
        "uffd_mode": run.get("uffd_mode"),
        "chunk_bytes": _int(region.get("chunk_size") or run.get("config", {}).get("chunk_size")),
        "chunks": _int(region.get("chunks")),
        "budget_bytes": _int(budget.get("budget_bytes") or meta.get("budget_bytes")),
        "window_bytes": _int(budget.get("window_bytes")),
        "page_table_bytes": _int(budget.get("page_table_bytes")),
        "budget_chunks": _int(budget.get("budget_chunks")),
        "miss_rate": (misses / accesses) if accesses else None,
        "fault_p50_ns": _int(lat.get("fault_p50")),
        "fault_p99_ns": _int(lat.get("fault_p99")),
        "demand_fault_p99_ns": _int(lat.get("demand_fault_p99")),
        "fill_p50_ns": _int(lat.get("fill_p50")),
        "wall_ns": _int(run.get("wall_ns")),
        "trace_records": _int(run.get("trace", {}).get("records")),
        "trace_sha256": _file_sha256(run_dir, listed, "trace.bin"),
        "host_grade": host.get("grade"),
        "cgroup_version": _int(cg.get("version")),
        "limit_bytes": _int(host.get("limit_bytes")),
        "overhead_bytes": _int(meta.get("overhead_bytes")),
        "peak_bytes": _int(cg.get("peak_bytes")),
        "limit_events": _int(cg.get("limit_events")),
        "pressure_events": _int(cg.get("pressure_events")),
        "oom_kills": _int(cg.get("oom_kills")),
        "engine_sha256": harness["engine"]["sha256"],
        "config_digest": meta.get("config_digest"),
        "run_dir": str(run_dir),
        "manifest_sha256": manifest_sha,
    }
    for name in ("steps", "accesses", "hits", "misses", "demand_fills", "prefetch_fills", "prefetch_used",
                 "evictions", "faults_handled", "spurious_faults", "signals", "logical_bytes_read",
                 "physical_bytes_read", "max_resident_chunks", "reconcile_checks", "reconcile_mismatches",
                 "content_checks", "content_check_ns", "content_mismatches"):
        row[name] = _int(counters.get(name))
    return row, run, meta


@_reads_run
def pager_synthetic_row(run_dir: Path, region_sha256: str | None) -> dict:
    """One row of results/pager_synthetic.parquet from a run directory."""
    from . import trace as trace_mod

    row, run, meta = _common(run_dir)
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
        "region_bytes": _int(run.get("region", {}).get("bytes")),
        "passes": _int(run.get("config", {}).get("passes")),
        "accesses_after_cold": acc_after,
        "misses_after_cold": miss_after,
        "bytes_verified": _int(counters.get("bytes_verified")),
        "verify_errors": _int(counters.get("verify_errors")),
        "region_sha256": region_sha256,
    })
    return row


def _stamp_llama(rows: list[dict], ident: dict | None, commit: bool = False) -> None:
    """Every row gets the llama.cpp build's digest (and, with `commit`, its commit: runs that
    do not record one themselves)."""
    from .llama_build import build_digest

    for row in rows:
        row["llama_build_sha256"] = build_digest(ident) if ident else None
        if commit:
            row["llama_commit"] = ident["commit"] if ident else None


def _llama(llama_identity: str | os.PathLike | None) -> dict | None:
    return json.loads(Path(llama_identity).read_text()) if llama_identity else None


def pager_synthetic_table(run_dirs: list[str], region: dict, llama: dict | None = None) -> pa.Table:
    rows = [pager_synthetic_row(Path(d), region["sha256"]) for d in run_dirs]
    _stamp_llama(rows, llama, commit=True)
    return _table(rows, PAGER_SYNTHETIC_SCHEMA)


def gather_pager_synthetic(run_dirs: list[str | os.PathLike], region_identity: str | os.PathLike,
                           out: str | os.PathLike, llama_identity: str | os.PathLike | None = None) -> pa.Table:
    """Write results/pager_synthetic.parquet from the given run directories."""
    return _write({"study": "pager-synthetic", "run_dirs": sorted(map(str, run_dirs)),
                   "identity": json.loads(Path(region_identity).read_text()), "oracle": None,
                   "llama": _llama(llama_identity)}, out)


def _consumption(run: dict) -> dict:
    """The consumption signal a pager run used (arm A has none: nulls)."""
    sa = run.get("signal_audit") or {}
    if run.get("arm") == KERNEL_MMAP or "consumption" not in sa:
        return {"consumption": None, "releases": None, "chunks_let_go_early": None}
    return {"consumption": sa["consumption"], "releases": _int(sa.get("releases")),
            "chunks_let_go_early": _int(sa.get("chunks_let_go_early"))}


def _object_chunks(run_dir: Path, names: list[str] | None) -> list[int] | None:
    """The chunk count of each named object, from the run's objects.json (the steps the
    engine declared); None when the run recorded no names or no manifest of objects."""
    objs = _load(run_dir / "objects.json") if names is not None else None
    if objs is None:
        return None
    size = {o["name"]: len(o["chunks"]) for o in objs.get("objects", [])}
    return [_int(size.get(n)) for n in names]


@_reads_run
def pager_model_row(run_dir: Path, model_identity: dict, oracle_dir: Path) -> dict:
    """One row of results/pager_model.parquet, compared with the oracle run."""
    from .exactness import compare

    row, run, meta = _common(run_dir)
    model = run.get("model", {})
    gen = run.get("generation", {})
    llama = run.get("llama", {})
    tokens = _int(gen.get("tokens"))
    n_layer = _int(model.get("n_layer"))
    phys = row["physical_bytes_read"]
    budget = run.get("budget", {})
    over = budget.get("oversize_objects")
    cmp = compare(run_dir, oracle_dir) if (oracle_dir / "tokens.json").exists() else None
    logits = run_dir / "logits.f32"
    row.update({
        "model": model_identity.get("name") or Path(model_identity["path"]).stem,
        "model_sha256": model_identity["sha256"],
        "model_bytes": _int(model.get("bytes")),
        "t_repr_bytes": _int(meta.get("t_repr_bytes")),
        "n_layer": n_layer,
        "n_vocab": _int(model.get("n_vocab")),
        "n_expert": _int(model.get("n_expert")),
        "objects": _int(run.get("objects")),
        "steps_per_pass": _int(run.get("steps_per_pass")),
        "fit_chunks": _int(budget.get("fit_chunks")),
        "oversize_steps": _int(run.get("counters", {}).get("oversize_steps")),
        "oversize_objects": list(over) if over is not None else None,
        "oversize_object_chunks": _object_chunks(run_dir, over),
        **_consumption(run),
        "prompt_tokens": _int(gen.get("prompt_tokens")),
        "tokens": tokens,
        "passes": _int(gen.get("passes")),
        "layer_transitions": n_layer * tokens if n_layer is not None and tokens is not None else None,
        "physical_bytes_per_token": (phys / tokens) if phys is not None and tokens else None,
        "prefill_ns": _int(gen.get("prefill_ns")),
        "decode_ns": _int(gen.get("decode_ns")),
        "tokens_per_s": gen.get("tokens_per_s"),
        "token_p99_ns": _int((gen.get("token_latency_ns") or {}).get("p99")),
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
    _stamp_llama(rows, llama)
    return _table(rows, PAGER_MODEL_SCHEMA)


def gather_pager_model(run_dirs: list[str | os.PathLike], oracle_dir: str | os.PathLike,
                       model_identity: str | os.PathLike, out: str | os.PathLike,
                       llama_identity: str | os.PathLike | None = None) -> pa.Table:
    """Write results/pager_model.parquet; every run is compared with `oracle_dir`."""
    return _write({"study": "pager-model", "run_dirs": sorted(map(str, run_dirs)),
                   "identity": json.loads(Path(model_identity).read_text()), "oracle": str(oracle_dir),
                   "llama": _llama(llama_identity)}, out)


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
    ("admissible", pa.bool_()),               # hard grade, headroom > 0, no limit event, no OOM kill
    ("reserve_bytes", pa.int64()),            # R_policy
    ("eq1_managed_bytes", pa.int64()),        # S (T_repr)
    ("eq1_cap_minus_reserve", pa.int64()),    # H_cap - R_policy
    ("eq1_margin_bytes", pa.int64()),         # S - (H_cap - R_policy); eq. 1 holds when > 0
])


SOURCE_STATS = ("submissions", "completions", "peak_depth", "windows", "windows_free_at_close",
                "tickets_outstanding_at_close", "dynamic_allocations", "rejections", "physical_bytes",
                "logical_bytes", "padding_bytes", "read_ns")


def admission(row: dict) -> bool | None:
    """The prespecified predicate: positive headroom, zero limit events, zero OOM kills,
    under a hard host limit (None when the grade cannot support it)."""
    if row["host_grade"] != "hard" or row["peak_bytes"] is None or row["limit_bytes"] is None:
        return None
    return bool(row["headroom_bytes"] > 0 and row["limit_events_total"] == 0 and (row["oom_kills"] or 0) == 0)


@_reads_run
def matched_source_row(run_dir: Path, model_identity: dict, oracle_dir: Path) -> dict:
    row = pager_model_row(run_dir, model_identity, oracle_dir)
    harness = json.loads((run_dir / "harness.json").read_text())
    meta = harness["meta"]
    run = _load(run_dir / "run.json") or {}
    src = run.get("source_stats") or {}
    tokens = row["tokens"]
    events = [row["limit_events"], row["pressure_events"]]
    reserve = _int(meta.get("reserve_bytes"))
    row.update({f"source_{k}": _int(src.get(k)) for k in SOURCE_STATS})
    row.update({
        "source_arm": meta.get("source_arm"),
        "block": int(meta.get("block", 0)),
        "order": meta.get("order") or None,
        "position": int(meta.get("position", 0)),
        "wall_s": float(harness["wall_s"]),
        "threads": _int((run.get("llama") or {}).get("threads")),
        "exposed_source_wait_ns": _int(run.get("counters", {}).get("exposed_source_wait_ns")),
        "readahead_max_steps_ahead": _int((run.get("readahead") or {}).get("max_steps_ahead")),
        "source_physical_bytes_per_output": (src["physical_bytes"] / tokens)
        if src.get("physical_bytes") is not None and tokens else None,
        "headroom_bytes": (row["limit_bytes"] - row["peak_bytes"])
        if row["limit_bytes"] is not None and row["peak_bytes"] is not None else None,
        "limit_events_total": sum(e for e in events if e is not None) if any(e is not None for e in events) else None,
        "reserve_bytes": reserve,
        "eq1_managed_bytes": row["t_repr_bytes"],
    })
    row["admissible"] = admission(row)
    if row["limit_bytes"] is not None and reserve is not None and row["t_repr_bytes"] is not None:
        row["eq1_cap_minus_reserve"] = row["limit_bytes"] - reserve
        row["eq1_margin_bytes"] = row["t_repr_bytes"] - row["eq1_cap_minus_reserve"]
    else:
        row["eq1_cap_minus_reserve"] = row["eq1_margin_bytes"] = None
    return row


def matched_source_table(run_dirs: list[str], ident: dict, oracle_dir: str, llama: dict | None = None) -> pa.Table:
    rows = [matched_source_row(Path(d), ident, Path(oracle_dir)) for d in run_dirs]
    _stamp_llama(rows, llama)
    rows.sort(key=lambda r: r["position"])
    return _table(rows, MATCHED_SOURCE_SCHEMA)


def gather_matched_source(run_dirs, oracle_dir, model_identity, out, llama_identity=None) -> pa.Table:
    """Write results/matched_source.parquet; every cell is compared with the oracle cell."""
    return _write({"study": "matched-source", "run_dirs": list(map(str, run_dirs)),
                   "identity": json.loads(Path(model_identity).read_text()), "oracle": str(oracle_dir),
                   "llama": _llama(llama_identity)}, out)


# ---- lineage: how a table was gathered, so `verify --deep` can gather it again ------------

TABLE_OF_STUDY = {"pager-synthetic": lambda lin: pager_synthetic_table(lin["run_dirs"], lin["identity"], lin.get("llama")),
                  "pager-model": lambda lin: pager_model_table(lin["run_dirs"], lin["identity"], lin["oracle"], lin.get("llama")),
                  "matched-source": lambda lin: matched_source_table(lin["run_dirs"], lin["identity"], lin["oracle"],
                                                                     lin.get("llama")),
                  "reclaim": lambda lin: _reclaim_table(lin),
                  "certificate": lambda lin: _certificate_table(lin),
                  "faults": lambda lin: _faults_table(lin), "reset-warm": lambda lin: _faults_table(lin),
                  "tasks": lambda lin: _tasks_table(lin),
                  "cache-transfer": lambda lin: _cache_transfer_table(lin),
                  "speculative": lambda lin: _speculative_table(lin),
                  "pager-model-roofline": lambda lin: _roofline_table(lin)}


def _tasks_table(lin: dict) -> pa.Table:
    from .gather_tasks import tasks_table  # it builds on this module

    return tasks_table(lin)


def _cache_transfer_table(lin: dict) -> pa.Table:
    from .gather_cache_transfer import cache_transfer_table  # it builds on this module

    return cache_transfer_table(lin)


def _speculative_table(lin: dict) -> pa.Table:
    from .gather_speculative import speculative_table  # it builds on this module

    return speculative_table(lin)


def _roofline_table(lin: dict) -> pa.Table:
    from .roofline import roofline_table  # it builds on this module

    return roofline_table(lin)


def _faults_table(lin: dict) -> pa.Table:
    from . import gather_faults as gf  # it builds on this module

    return gf.faults_table(lin) if lin["study"] == "faults" else gf.reset_warm_table(lin)


def _certificate_table(lin: dict) -> pa.Table:
    from .gather_certificate import certificate_table

    return certificate_table(lin)


def _reclaim_table(lin: dict) -> pa.Table:
    from .gather_reclaim import reclaim_table  # it builds on this module

    return reclaim_table(lin["run_dirs"], lin["identity"], lin.get("llama"))


def table_from(lin: dict) -> pa.Table:
    """The table a gather lineage describes, made again from its run directories."""
    return TABLE_OF_STUDY[lin["study"]](lin)


def _write(lin: dict, out: str | os.PathLike) -> pa.Table:
    lin = {"kind": "gather", **lin}
    table = lineage.attach(table_from(lin), lin)
    atomic.write_parquet(out, table)
    return table
