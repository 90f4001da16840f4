"""`residency verify` and `residency replay`: re-check a claim record against its inputs.

verify: every input file still has the recorded sha256, the assertions re-evaluated on the
recorded values give the recorded verdict, and the ledger entry matches the record.
replay: recompute `values` from the inputs with the claim's own function and compare.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from . import claims
from .claims import record
from .identity import sha256_file


def _load(claim_id: str, root: Path) -> dict:
    path = root / "claims" / f"{claim_id}.json"
    if not path.exists():
        raise FileNotFoundError(f"no claim record {path} (make it with: snakemake --cores 1 claims/{claim_id}.json)")
    return json.loads(path.read_text())


def verify(claim_id: str, root: Path) -> list[str]:
    """Problems found (empty list: the record verifies)."""
    doc = _load(claim_id, root)
    problems = []
    for inp in doc["inputs"]:
        p = root / inp["path"]
        if not p.exists():
            problems.append(f"input missing: {inp['path']}")
        elif sha256_file(p) != inp["sha256"]:
            problems.append(f"input changed since the record was made: {inp['path']}")
    verdict, reasons = record.verdict_of(doc, doc.get("insufficient", []))
    if verdict != doc["verdict"]:
        problems.append(f"assertions give verdict {verdict!r}, record says {doc['verdict']!r}")
    if reasons != doc.get("reasons", []):
        problems.append("re-evaluated reasons differ from the recorded reasons")
    ledger = root / claims.LEDGER_FILE
    if ledger.exists():
        entries = {e["id"]: e for e in json.loads(ledger.read_text())["claims"]}
        entry = entries.get(claim_id)
        rec_path = root / "claims" / f"{claim_id}.json"
        if entry is None:
            problems.append(f"{claims.LEDGER_FILE} has no entry for {claim_id}")
        elif entry["sha256"] != sha256_file(rec_path):
            problems.append(f"{claims.LEDGER_FILE} digest for {claim_id} does not match the record")
    return problems


def _diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: present on one side only")
            else:
                out += _diff(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}/{i}")]
    if isinstance(a, float) or isinstance(b, float):
        try:
            if math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0):
                return []
        except (TypeError, ValueError):
            pass
    return [] if a == b else [f"{path}: recorded {a!r}, recomputed {b!r}"]


def replay(claim_id: str, root: Path) -> list[str]:
    doc = _load(claim_id, root)
    fresh = claims.compute(claim_id, root, doc["settings"])
    problems = _diff(doc["values"], json.loads(json.dumps(fresh["values"])), "/values")
    if fresh["verdict"] != doc["verdict"]:
        problems.append(f"recomputed verdict {fresh['verdict']!r}, recorded {doc['verdict']!r}")
    return problems
