"""Gather of the roofline calibration runs (`residency run ... -- residctl stream`): one row
per rep, the storage bandwidth the roofline (roofline.py) divides by OPT's bytes per token.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from residency.gather import base

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
    row, run, _ = base.common_row(run_dir)
    src, cfg = run.get("source_stats") or {}, run.get("config") or {}
    phys, wall = base.to_int(src.get("physical_bytes")), base.to_int(run.get("wall_ns"))
    ok = row["status"] == "ok" and phys and wall
    return {"campaign": row["campaign"], "rep": row["rep"], "status": row["status"], "error": row["error"],
            "source_engine": run.get("source_engine"), "chunk_bytes": base.to_int(cfg.get("object_bytes")),
            "depth": base.to_int(src.get("depth")), "reads": base.to_int(src.get("completions")),
            "physical_bytes": phys, "wall_ns": wall,
            "bandwidth_bytes_per_s": phys / wall * 1e9 if ok else None,
            "file_bytes": base.to_int((run.get("file") or {}).get("bytes")),
            "engine_sha256": row["engine_sha256"], "config_digest": row["config_digest"],
            "run_dir": str(run_dir), "manifest_sha256": row["manifest_sha256"]}


def roofline_table(lin: dict) -> pa.Table:
    rows = sorted((calibration_row(Path(d)) for d in lin["run_dirs"]), key=lambda r: r["rep"])
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def gather_roofline(run_dirs: list[str | os.PathLike], out: str | os.PathLike) -> pa.Table:
    """Write results/pager_model_roofline.parquet: every calibration rep, ok or not."""
    return base.write({"study": STUDY, "run_dirs": sorted(map(str, run_dirs))}, out, roofline_table)
