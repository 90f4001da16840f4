"""results/speculative.parquet (claim C4): one row per cell of the speculative-decoding
campaign (greedy, speculative), made again from the run directories by `verify --deep`.
The speculative cell's tokens and logit rows are byte-compared with the greedy cell's (the
same build, arm, budget and source: plain greedy decoding of the target); both rows carry
the outcome, and the draft's identity (what it was made from, by which quantizer).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from residency.gather import base
from residency.evidence.exactness import compare
from residency.campaigns.speculative import GREEDY, SPECULATIVE

STUDY = "speculative"
ROUNDS = ("traversals", "drafted", "accepted", "full_groups", "rows_traversed", "decode_outputs", "draft_ns",
          "draft_load_bytes_read")


def cell_row(run_dir: Path) -> dict:
    row, run, meta = base.common_row(run_dir)
    gen, spec = run.get("generation") or {}, run.get("speculative") or {}
    wall = (gen.get("prefill_ns") or 0) + (gen.get("decode_wall_ns") or 0)
    tokens = base.to_int(gen.get("tokens"))
    out = {"cell": meta["cell"], "order": int(meta["order"]), "arm": row["arm"], "status": row["status"],
           "error": row["error"], "policy": row["policy"], "source_engine": row["source_engine"],
           "chunk_bytes": row["chunk_bytes"], "budget_bytes": row["budget_bytes"], "chunks": row["chunks"],
           "tokens": tokens, "prompt_tokens": base.to_int(gen.get("prompt_tokens")),
           "passes": base.to_int(gen.get("passes")), "prefill_ns": base.to_int(gen.get("prefill_ns")),
           "decode_ns": base.to_int(gen.get("decode_ns")), "decode_wall_ns": base.to_int(gen.get("decode_wall_ns")),
           "end_to_end_tokens_per_s": tokens * 1e9 / wall if tokens and wall else None,
           "physical_bytes_read": row["physical_bytes_read"], "misses": row["misses"],
           "draft_max": base.to_int(spec.get("draft_max")),
           "outputs_per_traversal": spec.get("outputs_per_traversal"),
           **base.predicate_values(row),
           "engine_sha256": row["engine_sha256"], "config_digest": row["config_digest"],
           "run_dir": str(run_dir), "manifest_sha256": row["manifest_sha256"]}
    return out | {k: base.to_int(spec.get(k)) for k in ROUNDS}


# The table's columns, declared: a column that is null in every run keeps its type.
SPECULATIVE_SCHEMA = pa.schema([
    ("cell", pa.string()),
    ("order", pa.int64()),
    ("arm", pa.string()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("policy", pa.string()),
    ("source_engine", pa.string()),
    ("chunk_bytes", pa.int64()),
    ("budget_bytes", pa.int64()),
    ("chunks", pa.int64()),
    ("tokens", pa.int64()),
    ("prompt_tokens", pa.int64()),
    ("passes", pa.int64()),
    ("prefill_ns", pa.int64()),
    ("decode_ns", pa.int64()),
    ("decode_wall_ns", pa.int64()),
    ("end_to_end_tokens_per_s", pa.float64()),
    ("physical_bytes_read", pa.int64()),
    ("misses", pa.int64()),
    ("draft_max", pa.int64()),
    ("outputs_per_traversal", pa.float64()),
] + base.PREDICATE_COLUMNS + [
    ("engine_sha256", pa.string()),
    ("config_digest", pa.string()),
    ("run_dir", pa.string()),
    ("manifest_sha256", pa.string()),
    ("traversals", pa.int64()),
    ("drafted", pa.int64()),
    ("accepted", pa.int64()),
    ("full_groups", pa.int64()),
    ("rows_traversed", pa.int64()),
    ("decode_outputs", pa.int64()),
    ("draft_ns", pa.int64()),
    ("draft_load_bytes_read", pa.int64()),
    ("tokens_equal_greedy", pa.bool_()),
    ("logits_equal_greedy", pa.bool_()),
    ("rows_compared", pa.int64()),
    ("exactness_detail", pa.string()),
    ("draft_sha256", pa.string()),
    ("draft_bytes", pa.int64()),
    ("draft_type", pa.string()),
    ("draft_from_sha256", pa.string()),
    ("draft_llama_commit", pa.string()),
])


def speculative_table(lin: dict) -> pa.Table:
    rows = sorted((cell_row(Path(d)) for d in lin["run_dirs"]), key=lambda r: r["order"])
    by_cell = {r["cell"]: r for r in rows}
    g, s = by_cell.get(GREEDY), by_cell.get(SPECULATIVE)
    cmp = compare(s["run_dir"], g["run_dir"]) if g and s and g["status"] == s["status"] == "ok" else None
    draft = lin["identity"]
    for r in rows:
        r["tokens_equal_greedy"] = cmp.tokens_equal if cmp else None
        r["logits_equal_greedy"] = cmp.logits_equal if cmp else None
        r["rows_compared"] = cmp.rows_compared if cmp else None
        r["exactness_detail"] = (cmp.detail or None) if cmp else "no complete greedy/speculative pair to compare"
        r |= {"draft_sha256": draft["sha256"], "draft_bytes": draft["bytes"], "draft_type": draft["type"],
              "draft_from_sha256": draft["from"]["sha256"], "draft_llama_commit": draft["llama_commit"]}
    return base.to_table(rows, SPECULATIVE_SCHEMA)


def gather_speculative(run_dirs: list[str | os.PathLike], draft_identity: str, out: str) -> pa.Table:
    return base.write({"study": STUDY, "run_dirs": sorted(map(str, run_dirs)),
                       "identity": json.loads(Path(draft_identity).read_text())}, out, speculative_table)
