"""The I/O roofline of the real-model study, measured in the same campaign.

Two rates bound the decode throughput of any arm at a budget ratio r:

  - the compute rate: the unconstrained plain-mmap baseline's decode tokens/s (median of its
    valid runs): no policy decodes faster than the model with every weight resident;
  - the storage bandwidth over the bytes each token must read: this machine's O_DIRECT read
    rate of the model file at the campaign's chunk size and the source's depth (the
    roofline calibration runs, `residctl stream`, median of the reps), over OPT's bytes per
    token at r (Belady's fetches at the pager's capacity, the fewest any policy can read).

    roofline(r) = min(compute rate, bandwidth / OPT bytes per token at r)

Each arm's fraction of the roofline is its median decode tokens/s over the bound at its r.
OPT's bytes are the whole trace's (the prefill traversal included) over the generated tokens,
as the study's physical_bytes_per_token is.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa

from . import arms, gather

STUDY = "pager-model-roofline"

SCHEMA = pa.schema([
    ("campaign", pa.string()),             # roofline
    ("rep", pa.int32()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("source_engine", pa.string()),        # the reader the calibration used (the pager's source)
    ("chunk_bytes", pa.int64()),           # read size: pager_model.chunk_bytes
    ("depth", pa.int64()),                 # reads in flight (direct, buffered: 1)
    ("reads", pa.int64()),
    ("physical_bytes", pa.int64()),        # bytes the reads moved, alignment padding included
    ("wall_ns", pa.int64()),               # the stream's wall time
    ("bandwidth_bytes_per_s", pa.float64()),
    ("file_bytes", pa.int64()),
    ("engine_sha256", pa.string()),
    ("config_digest", pa.string()),
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),
])


def calibration_row(run_dir: Path) -> dict:
    """One row of the roofline table from a `residency run ... -- residctl stream` directory."""
    row, run, _ = gather._common(run_dir)
    src, cfg = run.get("source_stats") or {}, run.get("config") or {}
    phys, wall = gather._int(src.get("physical_bytes")), gather._int(run.get("wall_ns"))
    ok = row["status"] == "ok" and phys and wall
    return {"campaign": row["campaign"], "rep": row["rep"], "status": row["status"], "error": row["error"],
            "source_engine": run.get("source_engine"), "chunk_bytes": gather._int(cfg.get("object_bytes")),
            "depth": gather._int(src.get("depth")), "reads": gather._int(src.get("completions")),
            "physical_bytes": phys, "wall_ns": wall,
            "bandwidth_bytes_per_s": phys / wall * 1e9 if ok else None,
            "file_bytes": gather._int((run.get("file") or {}).get("bytes")),
            "engine_sha256": row["engine_sha256"], "config_digest": row["config_digest"],
            "run_dir": str(run_dir), "manifest_sha256": row["manifest_sha256"]}


def roofline_table(lin: dict) -> pa.Table:
    rows = sorted((calibration_row(Path(d)) for d in lin["run_dirs"]), key=lambda r: r["rep"])
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def gather_roofline(run_dirs: list[str | os.PathLike], out: str | os.PathLike) -> pa.Table:
    """Write results/pager_model_roofline.parquet: every calibration rep, ok or not."""
    return gather._write({"study": STUDY, "run_dirs": sorted(map(str, run_dirs))}, out)


class RooflineError(ValueError):
    pass


def bandwidth(calib: pd.DataFrame) -> float:
    """Median bandwidth (bytes/s) of the calibration reps that completed."""
    ok = calib[(calib["status"] == "ok") & calib["bandwidth_bytes_per_s"].notna()]
    if ok.empty:
        raise RooflineError("roofline: no completed calibration run (results/pager_model_roofline.parquet)")
    return float(ok["bandwidth_bytes_per_s"].median())


def compute_rate(runs: pd.DataFrame) -> float:
    """Median decode tokens/s of the valid unconstrained baseline runs."""
    base = runs[(runs["campaign"] == "baseline") & runs["valid"].fillna(False).astype(bool)]["tokens_per_s"].dropna()
    if base.empty:
        raise RooflineError("roofline: no valid unconstrained baseline run to take the compute rate from")
    return float(base.median())


def opt_bytes_per_token(runs: pd.DataFrame, opt: pd.DataFrame) -> pd.Series:
    """OPT's physical bytes per generated token per r: Belady's misses at the pager's
    capacity, from D's own traces (as figure 06 draws it), times the chunk size; median of reps."""
    o = opt[(opt["campaign"] == "main") & (opt["arm"] == arms.PAGER_DECLARED) & opt["opt_misses"].notna()
            & opt["valid"].fillna(False).astype(bool)]
    o = o[["run_dir", "r", "opt_misses"]].merge(runs[["run_dir", "chunk_bytes", "tokens"]], on="run_dir")
    o = o[o["tokens"] > 0]
    return (o["opt_misses"] * o["chunk_bytes"] / o["tokens"]).groupby(o["r"]).median().rename("opt_bytes_per_token")


def bound(runs: pd.DataFrame, opt: pd.DataFrame, calib: pd.DataFrame) -> pd.DataFrame:
    """The roofline per r: columns r, bandwidth_bytes_per_s, compute_tokens_per_s,
    opt_bytes_per_token, io_tokens_per_s, roofline_tokens_per_s, bound_by (compute | io)."""
    bw, cr = bandwidth(calib), compute_rate(runs)
    bpt = opt_bytes_per_token(runs, opt)
    df = bpt.reset_index()
    df["bandwidth_bytes_per_s"] = bw
    df["compute_tokens_per_s"] = cr
    df["io_tokens_per_s"] = bw / df["opt_bytes_per_token"]
    df["roofline_tokens_per_s"] = df[["compute_tokens_per_s", "io_tokens_per_s"]].min(axis=1)
    df["bound_by"] = ["compute" if c <= i else "io" for c, i in zip(df["compute_tokens_per_s"], df["io_tokens_per_s"])]
    return df[["r", "bandwidth_bytes_per_s", "compute_tokens_per_s", "opt_bytes_per_token", "io_tokens_per_s",
               "roofline_tokens_per_s", "bound_by"]].sort_values("r").reset_index(drop=True)


def fractions(runs: pd.DataFrame, roof: pd.DataFrame) -> pd.DataFrame:
    """Each arm's median decode tokens/s (valid main runs) over the roofline at its r:
    columns arm, r, tokens_per_s, roofline_tokens_per_s, fraction_of_roofline."""
    main = runs[(runs["campaign"] == "main") & runs["valid"].fillna(False).astype(bool)]
    g = main.groupby(["arm", "r"])["tokens_per_s"].median().reset_index()
    g = g.merge(roof[["r", "roofline_tokens_per_s"]], on="r", how="left")
    g["fraction_of_roofline"] = g["tokens_per_s"] / g["roofline_tokens_per_s"]
    return g


def from_parquet(runs_parquet, opt_parquet, roofline_parquet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(bound per r, fractions per arm and r) from the study's three tables."""
    runs, opt = pd.read_parquet(runs_parquet), pd.read_parquet(opt_parquet)
    roof = bound(runs, opt, pd.read_parquet(roofline_parquet))
    return roof, fractions(runs, roof)
