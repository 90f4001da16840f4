"""Gather's base: what every study's gather shares.

A row of any study starts from `common_row`: what the engine counted (`run.json`), what the
kernel said about the run's cgroup (`harness.json`), the trace digest and the identities
(engine sha256, region or model sha256, config digest), so any number in a figure leads
back to the run directory (`run_dir`), then to the engine counter of the same name.

Every row carries the sha256 of its run's `manifest.json` (`manifest_sha256`), and gather
checks every file of the run against that manifest first: a run changed after it was
recorded stops the gather with one line naming the file. A run directory without a
manifest is incomplete (the harness never finished recording it): it is gathered with
status `incomplete`, `manifest_sha256` null and the reason in `error`, so no claim counts
it as a run that completed. `write` records how a table was made (its lineage: the study,
the run directories, the identity and oracle) so `residency verify --deep` can gather it
again and compare (gather_studies.table_from).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pyarrow as pa

from residency.core import atomic, lineage, manifest, records
from residency.core.arms import PAGER_LETTER as ARM_LETTER
from residency.core.identity import sha256_file
from residency.evidence import resource

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
    ("admissible", pa.bool_()),           # evidence/resource.py: grade, limit, peak and the three counters above
    ("engine_sha256", pa.string()),
    ("config_digest", pa.string()),
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),     # sha256 of run_dir/manifest.json (null: incomplete run)
]
# The resource predicate's inputs and its value (evidence/resource.py), as a study that
# picks its own columns records them.
PREDICATE_COLUMNS = [c for c in HOST_COLUMNS if c[0] in resource.COLUMNS + ("admissible",)]


def predicate_values(row: dict) -> dict:
    """The PREDICATE_COLUMNS of a common row."""
    return {name: row[name] for name, _ in PREDICATE_COLUMNS}


# What the run was made with beyond its config, and what its fills were checked against.
PROVENANCE_COLUMNS = [
    ("llama_build_sha256", pa.string()),  # the llama.cpp build the engine links (llama_build.build_digest)
    ("content_checks", pa.int64()),       # pager fills checked against the content digests (0: check off)
    ("content_check_ns", pa.int64()),     # time spent hashing them
    ("content_mismatches", pa.int64()),   # a mismatch fails the run closed
]

class GatherError(ValueError):
    """A run record (run.json, harness.json, objects.json) gather cannot read, or a value of
    one that does not fit its table's column: one line naming the run directory."""


# What reading a malformed record raises (a list where an object was, a missing key, text
# where a number was, a value too big for its column).
_MALFORMED = (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError, ValueError, AttributeError,
              OverflowError)


def one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def reads_run(fn):
    """A reader of one run directory (its first argument): a malformed record is GatherError.
    A missing harness.json (FileNotFoundError), a run changed after it was recorded
    (manifest.ManifestError) and a malformed trace.bin (trace.TraceError) stay what they are."""
    @functools.wraps(fn)
    def read(run_dir, *args, **kwargs):
        from residency.core.trace import TraceError

        try:
            return fn(run_dir, *args, **kwargs)
        except (GatherError, TraceError, manifest.ManifestError, FileNotFoundError):
            raise
        except records.RecordError as exc:
            raise GatherError(str(exc)) from None
        except _MALFORMED as exc:
            raise GatherError(f"{run_dir}: a run record gather cannot read ({one_line(exc)})") from None
    return read


def to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """The rows as a table; a value that does not fit its column is GatherError."""
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        dirs = ", ".join(str(r.get("run_dir")) for r in rows[:3]) + (", ..." if len(rows) > 3 else "")
        raise GatherError(f"a run record's value does not fit its column ({one_line(exc)}; runs {dirs})") from None


def load_record(path: Path) -> dict | None:
    """A run record's object; None when the file is absent (GatherError when it is no object)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    if not isinstance(doc, dict):
        raise GatherError(f"{path}: not a JSON object (a {type(doc).__name__})")
    return doc


def to_int(v):
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


@reads_run
def common_row(run_dir: Path) -> tuple[dict, dict, dict]:
    """(row of RUN_COLUMNS + HOST_COLUMNS, run.json, harness meta) of a run directory."""
    harness = load_record(run_dir / "harness.json")
    if harness is None:
        raise FileNotFoundError(f"{run_dir}: no harness.json (the run was never recorded)")
    records.check(harness, "harness", run_dir / "harness.json")
    manifest_sha, listed = _manifest(run_dir)
    meta = harness["meta"]
    run = records.check(load_record(run_dir / "run.json") or {}, "run", run_dir / "run.json")
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
        "chunk_bytes": to_int(region.get("chunk_size") or run.get("config", {}).get("chunk_size")),
        "chunks": to_int(region.get("chunks")),
        "budget_bytes": to_int(budget.get("budget_bytes") or meta.get("budget_bytes")),
        "window_bytes": to_int(budget.get("window_bytes")),
        "page_table_bytes": to_int(budget.get("page_table_bytes")),
        "budget_chunks": to_int(budget.get("budget_chunks")),
        "miss_rate": (misses / accesses) if accesses else None,
        "fault_p50_ns": to_int(lat.get("fault_p50")),
        "fault_p99_ns": to_int(lat.get("fault_p99")),
        "demand_fault_p99_ns": to_int(lat.get("demand_fault_p99")),
        "fill_p50_ns": to_int(lat.get("fill_p50")),
        "wall_ns": to_int(run.get("wall_ns")),
        "trace_records": to_int(run.get("trace", {}).get("records")),
        "trace_sha256": _file_sha256(run_dir, listed, "trace.bin"),
        "host_grade": host.get("grade"),
        "cgroup_version": to_int(cg.get("version")),
        "limit_bytes": to_int(host.get("limit_bytes")),
        "overhead_bytes": to_int(meta.get("overhead_bytes")),
        "peak_bytes": to_int(cg.get("peak_bytes")),
        "limit_events": to_int(cg.get("limit_events")),
        "pressure_events": to_int(cg.get("pressure_events")),
        "oom_kills": to_int(cg.get("oom_kills")),
        "engine_sha256": harness["engine"]["sha256"],
        "config_digest": meta.get("config_digest"),
        "run_dir": str(run_dir),
        "manifest_sha256": manifest_sha,
    }
    for name in ("steps", "accesses", "hits", "misses", "demand_fills", "prefetch_fills", "prefetch_used",
                 "evictions", "faults_handled", "spurious_faults", "signals", "logical_bytes_read",
                 "physical_bytes_read", "max_resident_chunks", "reconcile_checks", "reconcile_mismatches",
                 "content_checks", "content_check_ns", "content_mismatches"):
        row[name] = to_int(counters.get(name))
    row["admissible"] = resource.admissible(resource.HostCounters.of_row(row))
    return row, run, meta


def stamp_llama(rows: list[dict], ident: dict | None, commit: bool = False) -> None:
    """Every row gets the llama.cpp build's digest (and, with `commit`, its commit: runs that
    do not record one themselves)."""
    from residency.inputs.llama_build import build_digest

    for row in rows:
        row["llama_build_sha256"] = build_digest(ident) if ident else None
        if commit:
            row["llama_commit"] = ident["commit"] if ident else None


def llama_record(llama_identity: str | os.PathLike | None) -> dict | None:
    return json.loads(Path(llama_identity).read_text()) if llama_identity else None


def write(lin: dict, out: str | os.PathLike, make) -> pa.Table:
    """Write the table `make(lin)` builds, its lineage `lin` attached (verify --deep makes it
    again from the same lineage through gather.studies), atomically to `out`."""
    lin = {"kind": "gather", **lin}
    table = lineage.attach(make(lin), lin)
    atomic.write_parquet(out, table)
    return table
