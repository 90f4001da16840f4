"""Paper Table 9 of reference 004: the additional experiment populations (C4, C5, C12, C6,
C7), one row per claim record, never pooled. Each row's resource authority is read from
the record's own input table (its cells' host grades and limits, as the harness recorded
them); its correctness or utility scope from the record's values; its result is the
record's headline, with its verdict."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from residency.render.tables import write_table

MiB = 1 << 20
CAMPAIGNS = {"C4": "speculative decoding (temporal amortization)", "C5": "task utility under streaming",
             "C12": "shared-Plan reset/warm parity", "C6": "shared-Plan comparison (zero-margin F1)",
             "C7": "cache transfer (zero reuse vs per-layer LRU-k)"}


def _present(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def authority(cells: pd.DataFrame) -> str:
    """The host grades (with their limits) of a table's cells, and the GPU grade where recorded."""
    parts = []
    limits = cells["limit_bytes"] if "limit_bytes" in cells else pd.Series([None] * len(cells), index=cells.index)
    for grade, limit in sorted({(str(g), float(x) if _present(x) else None) for g, x in zip(cells["host_grade"], limits)},
                               key=lambda p: (p[0], p[1] or 0)):
        parts.append(f"host {grade}" + (f" {limit / MiB:.2f} MiB" if limit else ""))
    gpu = sorted({str(g) for g in cells["gpu_grade"]}) if "gpu_grade" in cells else ["absent (no device placement)"]
    return "; ".join(parts) + f"; GPU {'/'.join(gpu)}"


def scope(doc: dict) -> str:
    """What each record's exactness or utility relation covered, from its values."""
    v, i = doc["values"], doc["id"]
    if i == "C4":
        exact = all(x is True for x in v.get("exact") or [None])
        return (f"{v.get('tokens')} tokens and {v.get('rows_compared')} committed logit rows equal greedy decoding: "
                f"{exact}; hybrid state: {v.get('hybrid_state_rebasing', '').split(':')[0]}")
    if i == "C5":
        return (f"{v.get('n')} seeded extractive-QA tasks; token F1; {v.get('tokens_identical_count')}/{v.get('n')} "
                "outputs token-identical")
    if i == "C6":
        return f"{v.get('valid_cells')} valid cells; the prespecified zero-margin F1 criterion"
    if i == "C12":
        return (f"one primary/warm process; tokens equal the oracle (primary {v.get('primary_tokens_equal_oracle')}, "
                f"warm {v.get('warm_tokens_equal_oracle')}); lifecycle balanced {all(v.get('balanced_all') or [False])}")
    if i == "C7":
        exact = sum(1 for p in (v.get("pairs") or {}).values() if p.get("tokens_equal") and p.get("logits_equal"))
        return f"tokens and full logits exact in {exact} of {v.get('n_pairs')} same-scheduler pairs"
    return ""


def table9_populations(claim_paths: list[str], stem) -> pd.DataFrame:
    rows = []
    for p in claim_paths:
        doc = json.loads(Path(p).read_text())
        inputs = [x["path"] for x in doc["inputs"] if x["path"].endswith(".parquet")]
        cells = pd.concat([pd.read_parquet(x) for x in inputs], ignore_index=True)
        rows.append({"record": doc["id"], "campaign": CAMPAIGNS.get(doc["id"], doc["id"]),
                     "resource authority": authority(cells), "correctness or utility scope": scope(doc),
                     "result": doc["headline"], "verdict": doc["verdict"]})
    df = pd.DataFrame(rows)
    write_table(df, stem, "Table 9: additional experiment populations; each row scoped to its own record, not pooled")
    return df
