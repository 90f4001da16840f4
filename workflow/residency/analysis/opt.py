"""Analysis of the synthetic pager campaign: the Belady bound per run and determinism.

`opt_table` recomputes OPT from each run's own recorded reference trace (not from the
configured shape), at the capacity the pager really had (`budget_chunks`, after its
window was paid from the budget) and at the nominal capacity floor(r*T_repr/chunk), and
cross-checks the trace-based count against the cyclic-scan closed form.
`determinism_table` groups repetitions of one cell and compares their trace digests and
their access outcomes; where traces differ it says where and by how much.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from residency.core.arms import KERNEL_MMAP
from residency.core import atomic, lineage
from residency.analysis import belady
from residency.evidence import tensor_reference
from residency.core import trace as trace_mod
from residency.core.identity import sha256_file

CELL_KEYS = ["campaign", "arm", "r", "threads", "compute_us", "signal", "sync", "jitter_us"]
SYNTHETIC_KEYS = ("threads", "compute_us", "signal", "sync", "jitter_us")  # a synthetic run's cell beyond arm and r
# carried through for claim scopes
IDENTITY = ["engine_sha256", "region_sha256", "config_digest", "llama_commit", "llama_build_sha256"]

OPT_SCHEMA = pa.schema([
    ("campaign", pa.string()), ("arm", pa.string()), ("arm_letter", pa.string()),
    ("r", pa.float64()), ("rep", pa.int32()), ("threads", pa.int32()),
    ("compute_us", pa.int32()), ("signal", pa.string()), ("sync", pa.string()), ("jitter_us", pa.int32()),
    ("status", pa.string()),
    ("accesses", pa.int64()), ("misses", pa.int64()),
    ("capacity_chunks", pa.int64()),          # the pager's capacity (budget_chunks)
    ("nominal_capacity_chunks", pa.int64()),  # floor(budget_bytes / chunk_bytes)
    ("opt_misses", pa.int64()),               # Belady at capacity_chunks, from the run's trace
    ("opt_misses_nominal", pa.int64()),
    ("opt_closed_form", pa.int64()),          # cyclic-scan closed form at capacity_chunks
    ("opt_miss_rate", pa.float64()),
    ("d_over_opt", pa.float64()),             # misses / opt_misses
    ("trace_sha256", pa.string()),
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),         # the run's manifest digest, as gathered
] + [(c, pa.string()) for c in IDENTITY])

DETERMINISM_SCHEMA = pa.schema([
    ("campaign", pa.string()), ("arm", pa.string()), ("r", pa.float64()),
    ("threads", pa.int32()), ("compute_us", pa.int32()), ("signal", pa.string()),
    ("sync", pa.string()), ("jitter_us", pa.int32()),
    ("reps", pa.int32()), ("reps_ok", pa.int32()),
    ("distinct_traces", pa.int32()),
    ("identical", pa.bool_()),
    ("distinct_outcomes", pa.int32()),     # distinct access outcomes (step, chunk, miss): trace.py
    ("outcomes_identical", pa.bool_()),
    ("misses_min", pa.int64()), ("misses_max", pa.int64()),
    ("evictions_min", pa.int64()), ("evictions_max", pa.int64()),
    ("demand_fills_min", pa.int64()), ("demand_fills_max", pa.int64()),
    ("differing_records", pa.int64()),     # between the first two distinct traces
    ("first_differing_step", pa.int64()),
] + [(c, pa.string()) for c in IDENTITY])


def _nominal(row) -> int | None:
    """The budget in chunks; None without both (a killed run has no run.json, so no chunk size)."""
    budget, chunk = row["budget_bytes"], row["chunk_bytes"]
    return int(budget // chunk) if pd.notna(budget) and pd.notna(chunk) and budget and chunk else None


def _capacity(row) -> int | None:
    if row["arm"] == KERNEL_MMAP:
        return _nominal(row)
    return int(row["budget_chunks"]) if pd.notna(row["budget_chunks"]) else None


def tensor_held_bounds(run_dir: Path, ref, steps, cap) -> tuple[int | None, int | None]:
    """(MIN holding the tensor being read, OPT) over the run's tensor-order reference
    (tensor_reference.py); nulls when its graph plan has no read order (consumption object)."""
    loaded = tensor_reference.load_for_run(run_dir)
    if loaded is None:
        return None, None
    ref2, groups = tensor_reference.tensor_reference(ref, steps, *loaded)
    return belady.step_held_min_misses(ref2, groups, cap), belady.opt_misses(ref2, cap)


def opt_table(runs: pd.DataFrame, keys=SYNTHETIC_KEYS, cyclic=True,
              identity=IDENTITY, step_held=False) -> pd.DataFrame:
    """OPT per run from its own trace. `cyclic`: the trace is a plain cyclic chunk scan, so
    the closed form applies as a cross-check (the synthetic study). `step_held`: also MIN
    holding each step's chunks while it computes (the real-model study)."""
    rows = []
    for _, row in runs.iterrows():
        trace_path = Path(row["run_dir"]) / "trace.bin"
        cap = _capacity(row) if pd.notna(row["budget_bytes"]) else None
        nominal = _nominal(row)
        opt = opt_nom = closed = held = None
        tensor_held = (None, None)
        if trace_path.exists() and cap:
            trace = trace_mod.read(trace_path)
            ref = trace.reference()
            opt = belady.opt_misses(ref, cap)
            if step_held:
                steps = trace.reference_steps()
                held = belady.step_held_min_misses(ref, steps, cap)
                tensor_held = tensor_held_bounds(Path(row["run_dir"]), ref, steps, cap)
            opt_nom = belady.opt_misses(ref, nominal) if nominal else None
            if cyclic:
                closed = belady.cyclic_scan_opt(int(row["chunks"]), cap, int(row["passes"]))
        rows.append({
            **{k: row[k] for k in ["campaign", "arm", "arm_letter", "r", "rep", *keys, "status", "accesses",
                                   "misses", "trace_sha256", "run_dir", "manifest_sha256", *identity]},
            "capacity_chunks": cap, "nominal_capacity_chunks": nominal,
            "opt_misses": opt, "opt_misses_nominal": opt_nom, "opt_closed_form": closed,
            "opt_miss_rate": (opt / row["accesses"]) if opt is not None and row["accesses"] else None,
            "d_over_opt": (row["misses"] / opt) if opt else None,
            **({"step_held_min_misses": held, "d_over_step_held_min": (row["misses"] / held) if held else None,
                "tensor_held_min_misses": tensor_held[0],
                "d_over_tensor_held_min": (row["misses"] / tensor_held[0]) if tensor_held[0] else None,
                "opt_misses_tensor_order": tensor_held[1]}
               if step_held else {}),
        })
    return pd.DataFrame(rows)


def _first_difference(a: Path, b: Path) -> tuple[int, int | None]:
    """(number of differing records, first step where they differ) between two traces."""
    ta, tb = trace_mod.read(a).records, trace_mod.read(b).records
    n = min(len(ta), len(tb))
    ra = ta[:n].view(np.uint8).reshape(n, -1)
    rb = tb[:n].view(np.uint8).reshape(n, -1)
    neq = np.nonzero(np.any(ra != rb, axis=1))[0]
    count = int(len(neq)) + abs(len(ta) - len(tb))
    if len(neq):
        first = int(min(ta[neq[0]]["step"], tb[neq[0]]["step"]))
    elif len(ta) != len(tb):
        first = int((ta if len(ta) > len(tb) else tb)[n]["step"])
    else:
        first = None
    return count, first


def determinism_table(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for key, grp in runs.groupby(CELL_KEYS, dropna=False, sort=True):
        ok = grp[grp["status"] == "ok"]
        digests = list(dict.fromkeys(ok["trace_sha256"].dropna()))
        outcomes = {trace_mod.read(Path(d) / "trace.bin").outcomes_sha256()
                    for d in ok["run_dir"] if (Path(d) / "trace.bin").exists()}
        differing = first = None
        if len(digests) > 1:
            a = ok[ok["trace_sha256"] == digests[0]].iloc[0]["run_dir"]
            b = ok[ok["trace_sha256"] == digests[1]].iloc[0]["run_dir"]
            differing, first = _first_difference(Path(a) / "trace.bin", Path(b) / "trace.bin")
        elif len(digests) == 1:
            differing = 0
        rows.append({
            **dict(zip(CELL_KEYS, key)),
            "reps": len(grp), "reps_ok": len(ok),
            "distinct_traces": len(digests),
            "identical": len(digests) == 1 and len(ok) == len(grp),
            "distinct_outcomes": len(outcomes),
            "outcomes_identical": len(outcomes) == 1 and len(ok) == len(grp),
            "misses_min": ok["misses"].min() if len(ok) else None,
            "misses_max": ok["misses"].max() if len(ok) else None,
            "evictions_min": ok["evictions"].min() if len(ok) else None,
            "evictions_max": ok["evictions"].max() if len(ok) else None,
            "demand_fills_min": ok["demand_fills"].min() if len(ok) else None,
            "demand_fills_max": ok["demand_fills"].max() if len(ok) else None,
            "differing_records": differing, "first_differing_step": first,
            **{c: ",".join(sorted(grp[c].dropna().unique())) or None for c in IDENTITY},
        })
    return pd.DataFrame(rows, columns=DETERMINISM_SCHEMA.names)


def _write(df: pd.DataFrame, schema: pa.Schema, out: str | os.PathLike, lin: dict) -> None:
    """Write `df` with its lineage: the study, which output, and the source table's digest."""
    table = pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)
    atomic.write_parquet(out, lineage.attach(table, {"kind": "analysis", **lin}))


def _source(runs_parquet: str | os.PathLike) -> dict:
    return {"path": str(runs_parquet), "sha256": sha256_file(runs_parquet)}


def analyse_pager_synthetic(runs_parquet: str | os.PathLike, opt_out: str | os.PathLike,
                            determinism_out: str | os.PathLike) -> None:
    runs = pd.read_parquet(runs_parquet)
    lin = {"study": "pager-synthetic", "source": _source(runs_parquet)}
    _write(opt_table(runs), OPT_SCHEMA, opt_out, {**lin, "output": "opt"})
    _write(determinism_table(runs), DETERMINISM_SCHEMA, determinism_out, {**lin, "output": "determinism"})


MODEL_IDENTITY = ["engine_sha256", "model", "model_sha256", "config_digest", "llama_commit", "llama_build_sha256"]
MODEL_OPT_SCHEMA = pa.schema([f for f in OPT_SCHEMA if f.name not in (*SYNTHETIC_KEYS, *IDENTITY)]
                             + [("valid", pa.bool_()),
                                # MIN holding each step's chunks until the step ends (belady.py)
                                ("step_held_min_misses", pa.int64()),
                                ("d_over_step_held_min", pa.float64()),
                                # MIN holding only the tensor being read, over the reads in
                                # compute order (tensor_reference.py), and OPT over that order
                                ("tensor_held_min_misses", pa.int64()),
                                ("d_over_tensor_held_min", pa.float64()),
                                ("opt_misses_tensor_order", pa.int64())]
                             + [(c, pa.string()) for c in MODEL_IDENTITY])



def analyse_pager_model(runs_parquet: str | os.PathLike, opt_out: str | os.PathLike) -> None:
    """OPT per run of the real-model study, at the pager's capacity, from its own trace."""
    runs = pd.read_parquet(runs_parquet)
    runs = runs[runs["campaign"] == "main"]
    df = opt_table(runs, keys=("valid",), cyclic=False, identity=MODEL_IDENTITY, step_held=True)
    _write(df[MODEL_OPT_SCHEMA.names], MODEL_OPT_SCHEMA, opt_out,
           {"study": "pager-model", "source": _source(runs_parquet), "output": "opt"})


def remake(lin: dict, out_dir: Path) -> Path:
    """Run the analysis an analysis lineage names again, from its source table as it is
    now, into `out_dir`; return the path of the output the lineage describes."""
    src = lin["source"]["path"]
    if lin["study"] == "pager-synthetic":
        analyse_pager_synthetic(src, out_dir / "opt.parquet", out_dir / "determinism.parquet")
    else:
        analyse_pager_model(src, out_dir / "opt.parquet")
    return out_dir / f"{lin['output']}.parquet"
