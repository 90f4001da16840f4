"""`residency verify` and `residency replay`: re-check claim records against their inputs.

verify: every input file still has the recorded sha256, the assertions re-evaluated on the
recorded values give the recorded verdict, the record's computation is in its history,
and the ledger entry matches the record. `--deep` also follows every Parquet input down to
the run directories (deep.py: manifests, a fresh gather, a fresh analysis) and replays the
values. `--all` does this for every claim and checks the ledger itself.
replay: recompute `values` from the inputs with the claim's own function and compare.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

from . import claims, history
from .claims import record
from .identity import sha256_file

LEDGER = "ledger"  # the key of the ledger's own problems in verify_all's answer


def _load(claim_id: str, root: Path) -> dict:
    path = root / "claims" / f"{claim_id}.json"
    if not path.exists():
        raise FileNotFoundError(f"no claim record {path} (make it with: snakemake --cores 1 claims/{claim_id}.json)")
    return json.loads(path.read_text())


def _inputs(doc: dict, root: Path) -> list[str]:
    problems = []
    for inp in doc["inputs"]:
        p = root / inp["path"]
        if not p.exists():
            problems.append(f"input missing: {inp['path']}")
        elif sha256_file(p) != inp["sha256"]:
            problems.append(f"input changed since the record was made: {inp['path']}")
    return problems


def _history(claim_id: str, root: Path) -> list[str]:
    rec = root / "claims" / f"{claim_id}.json"
    hpath = history.path_for(rec, claim_id)
    try:
        past = history.read(hpath)
    except history.HistoryError as exc:
        return [str(exc)]
    digest = sha256_file(rec)
    if not any(e["record_sha256"] == digest for e in past):
        return [f"claims/{claim_id}.json is not in {hpath.relative_to(root)}: it was not made by `residency claim`"]
    return []


def _ledger_entry(claim_id: str, root: Path) -> list[str]:
    ledger = root / claims.LEDGER_FILE
    if not ledger.exists():
        return []
    entries = {e["id"]: e for e in json.loads(ledger.read_text())["claims"]}
    entry = entries.get(claim_id)
    if entry is None:
        return [f"{claims.LEDGER_FILE} has no entry for {claim_id}"]
    if entry["sha256"] != sha256_file(root / "claims" / f"{claim_id}.json"):
        return [f"{claims.LEDGER_FILE} digest for {claim_id} does not match the record"]
    return []


def verify(claim_id: str, root: Path, deep: bool = False, checker=None) -> list[str]:
    """Problems found (empty list: the record verifies). `checker`: a deep.Deep shared by
    several claims, so a table behind many claims is checked once."""
    root = Path(root).resolve()
    doc = _load(claim_id, root)
    problems = _inputs(doc, root)
    verdict, reasons = record.verdict_of(doc, doc.get("insufficient", []))
    if verdict != doc["verdict"]:
        problems.append(f"assertions give verdict {verdict!r}, record says {doc['verdict']!r}")
    if reasons != doc.get("reasons", []):
        problems.append("re-evaluated reasons differ from the recorded reasons")
    problems += _history(claim_id, root) + _ledger_entry(claim_id, root)
    if deep:
        problems += _deep(doc, root, checker)
    return problems


def _deep(doc: dict, root: Path, checker) -> list[str]:
    from . import deep

    checker = checker or deep.Deep()
    found = []
    with contextlib.chdir(root):
        for inp in doc["inputs"]:
            if inp["path"].endswith(".parquet"):
                found += [p for p in checker.table(inp["path"]) if p not in found]
    if found:  # the inputs are not what the runs give: replaying them would prove nothing more
        return found
    return replay(doc["id"], root)


def ledger_problems(root: Path) -> list[str]:
    """The ledger itself: it exists, lists every claim of the registry once and nothing
    else, each digest matches its record, each record is in its history, each count
    matches the history."""
    root = Path(root).resolve()
    path = root / claims.LEDGER_FILE
    if not path.exists():
        return [f"no {claims.LEDGER_FILE} (make it with: snakemake --cores 1 {claims.LEDGER_FILE})"]
    listed = [e["id"] for e in json.loads(path.read_text())["claims"]]
    problems = [f"{claims.LEDGER_FILE} does not list {cid}" for cid in sorted(set(claims.REGISTRY) - set(listed))]
    problems += [f"{claims.LEDGER_FILE} lists unknown claim {cid}" for cid in sorted(set(listed) - set(claims.REGISTRY))]
    problems += [f"{claims.LEDGER_FILE} lists {cid} {listed.count(cid)} times" for cid in sorted(set(listed))
                 if listed.count(cid) > 1]
    for e in json.loads(path.read_text())["claims"]:
        rec = root / "claims" / f"{e['id']}.json"
        if not rec.exists():
            problems.append(f"{claims.LEDGER_FILE} lists {e['id']}, but claims/{e['id']}.json is missing")
            continue
        problems += _ledger_entry(e["id"], root) + _history(e["id"], root) + _tally(e, rec)
    return problems


def _tally(entry: dict, rec: Path) -> list[str]:
    try:
        past = history.read(history.path_for(rec, entry["id"]))
    except history.HistoryError as exc:
        return [str(exc)]
    want = history.tally(past, entry.get("scope_sha256", ""))
    got = {k: entry.get(k) for k in want}
    return [] if got == want else [f"{claims.LEDGER_FILE}: {entry['id']} says {got}, its history says {want}"]


def verify_all(root: Path, deep: bool = False) -> dict[str, list[str]]:
    """Problems of the ledger (key LEDGER) and of every claim of the registry."""
    from . import deep as deep_mod

    root = Path(root).resolve()
    found = {LEDGER: ledger_problems(root)}
    checker = deep_mod.Deep() if deep else None
    for cid in claims.REGISTRY:
        if not (root / "claims" / f"{cid}.json").exists():
            found[cid] = [f"no claim record claims/{cid}.json"]
        else:  # the ledger's own lines are said once, under LEDGER
            found[cid] = [p for p in verify(cid, root, deep, checker) if p not in found[LEDGER]]
    return found


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
    fresh = claims.compute(claim_id, root, doc["settings"], doc.get("protocol"))
    problems = _diff(doc["values"], json.loads(json.dumps(fresh["values"])), "/values")
    if fresh["verdict"] != doc["verdict"]:
        problems.append(f"recomputed verdict {fresh['verdict']!r}, recorded {doc['verdict']!r}")
    return problems
