"""results/cache_transfer.parquet (claim C7): one row per cell of the cache-transfer campaign
(pager-zero against pager-lru-k, one pair per prompt), made again from the run directories by
`verify --deep`. Within each pair the lru-k cell's tokens and logit rows are byte-compared with
the zero cell's (the same build, scheduler and representation); both rows carry the outcome.
A row also says whether its cell started cold (the harness dropped the model's page cache
before a fresh process) and, from its chunk trace, the misses and hits of the prefill pass
and of the first decode pass: what the prefill's tail left resident seeds the decode
(one process, no reset between them), so a seeded cache shows as hits in that first pass.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from residency.gather import base
from residency.core import trace
from residency.core.arms import PAGER_LRU_K, PAGER_ZERO
from residency.evidence.exactness import compare

STUDY = "cache-transfer"


def pass_outcomes(run_dir: Path, run: dict) -> dict:
    """Misses and hits of the prefill pass (0) and the first decode pass (1) from trace.bin
    (None when the cell did not finish, has no trace or no decode pass)."""
    out = dict.fromkeys(("prefill_misses", "prefill_hits", "first_decode_misses", "first_decode_hits"))
    spp = base.to_int(run.get("steps_per_pass"))
    path = run_dir / "trace.bin"
    if not spp or not path.exists() or run.get("status") != "ok":
        return out
    acc = trace.read(path).accesses
    passes, miss = acc["step"] // spp, (acc["flags"] & trace.FLAG_MISS) != 0
    for k, name in ((0, "prefill"), (1, "first_decode")):
        if (passes == k).any():
            out[f"{name}_misses"] = int(miss[passes == k].sum())
            out[f"{name}_hits"] = int((~miss[passes == k]).sum())
    return out


def cell_row(run_dir: Path) -> dict:
    row, run, meta = base.common_row(run_dir)
    harness = json.loads((run_dir / "harness.json").read_text())
    model = (run.get("config") or {}).get("model") or (run.get("model") or {}).get("path")
    gen, cfg = run.get("generation") or {}, run.get("config") or {}
    return {"pair": int(meta["pair"]), "order": int(meta["order"]), "arm": row["arm"], "status": row["status"],
            "error": row["error"], "policy": row["policy"], "lru_k": base.to_int(cfg.get("lru_k")),
            "source_engine": row["source_engine"], "chunk_bytes": row["chunk_bytes"], "budget_bytes": row["budget_bytes"],
            "budget_chunks": row["budget_chunks"], "chunks": row["chunks"], "tokens": base.to_int(gen.get("tokens")),
            "prefill_ns": base.to_int(gen.get("prefill_ns")), "decode_ns": base.to_int(gen.get("decode_ns")),
            "physical_bytes_read": row["physical_bytes_read"], "misses": row["misses"],
            "demand_fills": row["demand_fills"], **base.predicate_values(row),
            "engine_sha256": row["engine_sha256"], "config_digest": row["config_digest"],
            "run_dir": str(run_dir), "manifest_sha256": row["manifest_sha256"],
            # a cold prefill: the harness dropped the model's page cache before this fresh process
            "cold_start": model is not None and model in (harness.get("dropped_cache") or []),
            **pass_outcomes(run_dir, run)}


# The table's columns, declared: a column that is null in every run keeps its type.
CACHE_TRANSFER_SCHEMA = pa.schema([
    ("pair", pa.int64()),
    ("order", pa.int64()),
    ("arm", pa.string()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("policy", pa.string()),
    ("lru_k", pa.int64()),
    ("source_engine", pa.string()),
    ("chunk_bytes", pa.int64()),
    ("budget_bytes", pa.int64()),
    ("budget_chunks", pa.int64()),
    ("chunks", pa.int64()),
    ("tokens", pa.int64()),
    ("prefill_ns", pa.int64()),
    ("decode_ns", pa.int64()),
    ("physical_bytes_read", pa.int64()),
    ("misses", pa.int64()),
    ("demand_fills", pa.int64()),
] + base.PREDICATE_COLUMNS + [
    ("engine_sha256", pa.string()),
    ("config_digest", pa.string()),
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),
    ("cold_start", pa.bool_()),
    ("prefill_misses", pa.int64()),
    ("prefill_hits", pa.int64()),
    ("first_decode_misses", pa.int64()),
    ("first_decode_hits", pa.int64()),
    ("tokens_equal_pair", pa.bool_()),
    ("logits_equal_pair", pa.bool_()),
    ("exactness_detail", pa.string()),
])


def cache_transfer_table(lin: dict) -> pa.Table:
    rows = sorted((cell_row(Path(d)) for d in lin["run_dirs"]), key=lambda r: r["order"])
    by_pair: dict[int, dict[str, dict]] = {}
    for r in rows:
        by_pair.setdefault(r["pair"], {})[r["arm"]] = r
    for cells in by_pair.values():
        z, k = cells.get(PAGER_ZERO), cells.get(PAGER_LRU_K)
        cmp = (compare(k["run_dir"], z["run_dir"]) if z and k and z["status"] == k["status"] == "ok" else None)
        for r in cells.values():
            r["tokens_equal_pair"] = cmp.tokens_equal if cmp else None
            r["logits_equal_pair"] = cmp.logits_equal if cmp else None
            r["exactness_detail"] = (cmp.detail or None) if cmp else "no complete pair to compare"
    return base.to_table(rows, CACHE_TRANSFER_SCHEMA)


def gather_cache_transfer(run_dirs: list[str | os.PathLike], out: str) -> pa.Table:
    return base.write({"study": STUDY, "run_dirs": sorted(map(str, run_dirs))}, out, cache_transfer_table)
