"""`residency verify` and `residency replay`: re-check claim records against their inputs.

verify: every input file still has the recorded sha256, the assertions re-evaluated on the
recorded values give the recorded verdict, the record's computation is in its history,
and the ledger entry matches the record. `--deep` also follows every Parquet input down to
the run directories (deep.py: manifests, a fresh gather, a fresh analysis) and replays the
values. `--all` does this for every claim and checks the ledger itself.
replay: recompute `values` from the inputs with the claim's own function and compare.

`model`: a further model of a sweep (pager_model.models after the first). Its model claims
live in claims/models/<name>/ with their own history and ledger, and read their Parquet
from results/sweep/<name>/ (cells.SWEEP, cells.SWEEP_CLAIMS).
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

from residency import claims
from residency.claims import history
from residency.campaigns.cells import SWEEP, SWEEP_CLAIMS
from residency.claims import record, reference_values
from residency.core.identity import sha256_file

LEDGER = "ledger"  # the key of the ledger's own problems in verify_all's answer


class VerifyError(ValueError):
    """A claim named that the records cannot have (a bad command line, said in one line)."""


def claims_dir(model: str | None) -> str:
    return "claims" if model is None else f"{SWEEP_CLAIMS}/{model}"


def record_path(claim_id: str, root: Path, model: str | None = None) -> Path:
    return Path(root) / claims_dir(model) / f"{claim_id}.json"


def ledger_file(model: str | None) -> str:
    return claims.LEDGER_FILE if model is None else f"{claims_dir(model)}/ledger.json"


def registry(model: str | None) -> list[str]:
    """The claims a ledger lists: every claim, or a sweep model's model claims."""
    return list(claims.REGISTRY) if model is None else claims.model_claim_ids()


def _load(claim_id: str, root: Path, model: str | None = None) -> dict:
    path = record_path(claim_id, root, model)
    if model is not None and claim_id not in claims.model_claim_ids():
        raise VerifyError(f"{claim_id} is not a model claim ({', '.join(claims.model_claim_ids())}): "
                         "--model applies to model claims only")
    if not path.exists():
        rel = f"{claims_dir(model)}/{claim_id}.json"
        raise FileNotFoundError(f"no claim record {path} (make it with: snakemake --cores 1 {rel})")
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


def _history(claim_id: str, root: Path, model: str | None = None) -> list[str]:
    rec = record_path(claim_id, root, model)
    hpath = history.path_for(rec, claim_id)
    try:
        past = history.read(hpath)
    except history.HistoryError as exc:
        return [str(exc)]
    digest = sha256_file(rec)
    if not any(e["record_sha256"] == digest for e in past):
        return [f"{rec.relative_to(root)} is not in {hpath.relative_to(root)}: it was not made by `residency claim`"]
    return []


def _ledger_entry(claim_id: str, root: Path, model: str | None = None) -> list[str]:
    name = ledger_file(model)
    ledger = root / name
    if not ledger.exists():
        return []
    entries = {e["id"]: e for e in json.loads(ledger.read_text())["claims"]}
    entry = entries.get(claim_id)
    if entry is None:
        return [f"{name} has no entry for {claim_id}"]
    if entry["sha256"] != sha256_file(record_path(claim_id, root, model)):
        return [f"{name} digest for {claim_id} does not match the record"]
    return []


def verify(claim_id: str, root: Path, deep: bool = False, checker=None, model: str | None = None) -> list[str]:
    """Problems found (empty list: the record verifies). `checker`: a deep.Deep shared by
    several claims, so a table behind many claims is checked once."""
    root = Path(root).resolve()
    doc = _load(claim_id, root, model)
    problems = _inputs(doc, root)
    verdict, reasons = record.verdict_of(doc, doc.get("insufficient", []))
    if verdict != doc["verdict"]:
        problems.append(f"assertions give verdict {verdict!r}, record says {doc['verdict']!r}")
    if reasons != doc.get("reasons", []):
        problems.append("re-evaluated reasons differ from the recorded reasons")
    problems += _history(claim_id, root, model) + _ledger_entry(claim_id, root, model)
    if deep:
        problems += _deep(doc, root, checker, model)
    return problems


def _deep(doc: dict, root: Path, checker, model: str | None = None) -> list[str]:
    from residency.claims import deep

    checker = checker or deep.Deep()
    found = []
    with contextlib.chdir(root):
        for inp in doc["inputs"]:
            if inp["path"].endswith(".parquet"):
                found += [p for p in checker.table(inp["path"]) if p not in found]
    found = found or _scope_bytes(doc, checker)  # tables that hold, down to the bytes they name
    if found:  # the inputs are not what the runs give: replaying them would prove nothing more
        return found
    return replay(doc["id"], root, model)


def _scope_bytes(doc: dict, checker) -> list[str]:
    """The model or region digest(s) the scope names must be among the files the deep check
    re-hashed (through the inputs' lineage): a scope whose bytes nothing reached is named."""
    named = (doc.get("scope") or {}).get("model_sha256")
    named = [named] if isinstance(named, str) else list(named or [])
    return [f"scope names model sha256 {sha[:16]}, but no input's lineage names a file with those bytes"
            for sha in named if sha not in checker.hashed()]


def ledger_problems(root: Path, model: str | None = None) -> list[str]:
    """The ledger itself: it exists, lists every claim of the registry once and nothing
    else, each digest matches its record, each record is in its history, each count
    matches the history, and its reference values beside this run's are what the record gives."""
    root = Path(root).resolve()
    name, known = ledger_file(model), registry(model)
    path = root / name
    if not path.exists():
        return [f"no {name} (make it with: snakemake --cores 1 {name})"]
    listed = [e["id"] for e in json.loads(path.read_text())["claims"]]
    problems = [f"{name} does not list {cid}" for cid in sorted(set(known) - set(listed))]
    problems += [f"{name} lists unknown claim {cid}" for cid in sorted(set(listed) - set(known))]
    problems += [f"{name} lists {cid} {listed.count(cid)} times" for cid in sorted(set(listed))
                 if listed.count(cid) > 1]
    for e in json.loads(path.read_text())["claims"]:
        rec = record_path(e["id"], root, model)
        if not rec.exists():
            problems.append(f"{name} lists {e['id']}, but {claims_dir(model)}/{e['id']}.json is missing")
            continue
        problems += _ledger_entry(e["id"], root, model) + _history(e["id"], root, model) + _tally(e, rec, name)
        problems += reference_values.ledger_problems(e, json.loads(rec.read_text()), name)
    return problems


def _tally(entry: dict, rec: Path, name: str) -> list[str]:
    try:
        past = history.read(history.path_for(rec, entry["id"]))
    except history.HistoryError as exc:
        return [str(exc)]
    want = history.tally(past, entry.get("scope_sha256", ""))
    got = {k: entry.get(k) for k in want}
    return [] if got == want else [f"{name}: {entry['id']} says {got}, its history says {want}"]


def verify_all(root: Path, deep: bool = False, model: str | None = None) -> dict[str, list[str]]:
    """Problems of the ledger (key LEDGER) and of every claim of the registry."""
    from residency.claims import deep as deep_mod

    root = Path(root).resolve()
    found = {LEDGER: ledger_problems(root, model)}
    checker = deep_mod.Deep() if deep else None
    for cid in registry(model):
        if not record_path(cid, root, model).exists():
            found[cid] = [f"no claim record {claims_dir(model)}/{cid}.json"]
        else:  # the ledger's own lines are said once, under LEDGER
            found[cid] = [p for p in verify(cid, root, deep, checker, model) if p not in found[LEDGER]]
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


def replay(claim_id: str, root: Path, model: str | None = None) -> list[str]:
    doc = _load(claim_id, root, model)
    results = None if model is None else f"{SWEEP}/{model}"
    fresh = claims.compute(claim_id, root, doc["settings"], doc.get("protocol"), results)
    problems = _diff(doc["values"], json.loads(json.dumps(fresh["values"])), "/values")
    if fresh["verdict"] != doc["verdict"]:
        problems.append(f"recomputed verdict {fresh['verdict']!r}, recorded {doc['verdict']!r}")
    return problems
