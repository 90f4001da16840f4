"""Exactness: a run's outputs byte-compared with the oracle's (the unconstrained baseline
of the same build and settings).

The compared surfaces are the generated token ids and every complete logit row
(`logits.f32`, n_tokens x n_vocab float32). Any difference makes the run inexact and is
reported with the first differing step (generated-token index) and what differed there.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np


@dataclass
class Comparison:
    exact: bool
    tokens_equal: bool
    logits_equal: bool
    rows_compared: int
    rows_differing: int
    first_differing_step: int | None
    detail: str

    def as_dict(self) -> dict:
        return asdict(self)


def _tokens(run_dir: Path) -> list[int]:
    return json.loads((run_dir / "tokens.json").read_text())["tokens"]


def _rows(run_dir: Path, n_rows: int) -> np.ndarray:
    raw = np.fromfile(run_dir / "logits.f32", dtype="<u4")  # compared as bits, not as floats
    if n_rows == 0 or raw.size % n_rows:
        raise ValueError(f"{run_dir}/logits.f32: {raw.size} values do not split into {n_rows} rows")
    return raw.reshape(n_rows, -1)


def compare(run_dir: str | Path, oracle_dir: str | Path) -> Comparison:
    """Byte comparison of tokens and logit rows; missing outputs count as differences."""
    run_dir, oracle_dir = Path(run_dir), Path(oracle_dir)
    want_tokens = _tokens(oracle_dir)
    want = _rows(oracle_dir, len(want_tokens))
    try:
        got_tokens = _tokens(run_dir)
        got = _rows(run_dir, len(got_tokens))
    except (FileNotFoundError, ValueError, KeyError, json.JSONDecodeError) as exc:
        return Comparison(False, False, False, 0, len(want_tokens), 0, f"outputs missing or unreadable: {exc}")

    first_token = next((i for i, (a, b) in enumerate(zip(got_tokens, want_tokens)) if a != b), None)
    if first_token is None and len(got_tokens) != len(want_tokens):
        first_token = min(len(got_tokens), len(want_tokens))
    n = min(len(got), len(want))
    if got.shape[1:] != want.shape[1:]:
        return Comparison(False, first_token is None, False, 0, len(want_tokens), 0,
                          f"logit rows have {got.shape[1]} values, oracle {want.shape[1]}")
    differing = np.nonzero(np.any(got[:n] != want[:n], axis=1))[0]
    rows_differing = int(len(differing)) + abs(len(got) - len(want))
    first_row = int(differing[0]) if len(differing) else (n if len(got) != len(want) else None)
    firsts = [x for x in (first_token, first_row) if x is not None]
    first = min(firsts) if firsts else None
    detail = ""
    if first is not None:
        parts = []
        if first_token is not None:
            a = got_tokens[first_token] if first_token < len(got_tokens) else None
            b = want_tokens[first_token] if first_token < len(want_tokens) else None
            parts.append(f"token {first_token}: {a} vs oracle {b}")
        if first_row is not None and first_row < n:
            col = int(np.nonzero(got[first_row] != want[first_row])[0][0])
            parts.append(f"logit row {first_row} first differs at vocab index {col}")
        elif first_row is not None:
            parts.append(f"{len(got)} logit rows vs oracle {len(want)}")
        detail = "; ".join(parts)
    tokens_equal = got_tokens == want_tokens
    logits_equal = rows_differing == 0
    return Comparison(tokens_equal and logits_equal, tokens_equal, logits_equal, n, rows_differing, first, detail)


# ---- the full exactness relation (reference 004 eq. 4) --------------------------------------

TERMS = ("logits", "tokens", "response", "routes", "consumer", "destination")
RELATION = "E = E_logits ∧ E_tokens ∧ E_response ∧ E_routes ∧ E_consumer ∧ E_destination"
PREDICATES = {
    "logits": "for every generated token, byte-for-byte equality of its complete float32 logit row (equal row "
              "sha256 and equal whole-file sha256)",
    "tokens": "ordered equality of every generated token id",
    "response": "byte-identical decoded response (response.txt)",
    "routes": "ordered equality of every recorded route event (pass, layer, the experts selected per token)",
    "consumer": "field-by-field equality of run.json's consumer record (engine, adapter, runtime, graph, router, "
                "expert kernel, reduction, scheduling boundary)",
    "destination": "field-by-field equality of run.json's destination record (host memory, device memory)",
}


def first_difference(a, b, path: str = "") -> str | None:
    """The first place two JSON values differ (keys in sorted order), said, or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}/{k}: present in {'the oracle' if k in b else 'the run'} only"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}/{i}")
            if d:
                return d
        return None if len(a) == len(b) else f"{path}: {len(a)} items, oracle {len(b)}"
    return None if a == b and type(a) is type(b) else f"{path or '/'}: {a!r}, oracle {b!r}"


def _row_sha(run_dir: Path) -> list[str]:
    p = run_dir / "logits.sha256"
    return [line.split()[1] for line in p.read_text().splitlines() if line.strip()] if p.exists() else []


def _logits_term(run_dir: Path, oracle_dir: Path, cmp: Comparison) -> dict:
    from residency.core.identity import sha256_file

    def whole(d):
        return sha256_file(d / "logits.f32") if (d / "logits.f32").exists() else None

    got, want = _row_sha(run_dir), _row_sha(oracle_dir)
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    equal = cmp.logits_equal and got == want and whole(run_dir) == whole(oracle_dir)
    detail = None if equal else (cmp.detail or (f"row {first}: sha256 differs" if first is not None
                                                 else f"{len(got)} rows, oracle {len(want)}"))
    return {"equal": equal, "rows": cmp.rows_compared, "rows_differing": cmp.rows_differing,
            "candidate_sha256": whole(run_dir), "oracle_sha256": whole(oracle_dir),
            "candidate_row_sha256": got, "oracle_row_sha256": want, "first_difference": detail}


def _response_term(run_dir: Path, oracle_dir: Path) -> dict:
    def text(d):
        return (d / "response.txt").read_bytes() if (d / "response.txt").exists() else None

    a, b = text(run_dir), text(oracle_dir)
    if a is None or b is None:
        return {"equal": False, "bytes": None, "first_difference": "response.txt missing"}
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if i is None and len(a) != len(b):
        i = min(len(a), len(b))
    diff = None if i is None else (f"byte {i}: {a[i:i + 1].hex() or 'end'}, oracle {b[i:i + 1].hex() or 'end'}")
    return {"equal": a == b, "bytes": len(b), "first_difference": diff}


def _routes_term(run_dir: Path, oracle_dir: Path) -> dict:
    from residency.evidence.demand import routes

    a, b = routes(run_dir), routes(oracle_dir)
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), None)
    diff = None
    if i is not None:
        diff = (f"event {i} (pass {b[i]['pass']}, layer {b[i]['layer']}): "
                f"{first_difference(a[i], b[i]) or 'differs'}")
    elif len(a) != len(b):
        diff = f"{len(a)} route events, oracle {len(b)}"
    return {"equal": a == b, "events": len(b), "first_difference": diff}


def _record_term(run_dir: Path, oracle_dir: Path, key: str) -> dict:
    def rec(d):
        p = d / "run.json"
        return json.loads(p.read_text()).get(key) if p.exists() else None

    a, b = rec(run_dir), rec(oracle_dir)
    if a is None or b is None:
        return {"equal": False, "record": b, "first_difference": f"run.json has no {key} record"}
    diff = first_difference(a, b)
    return {"equal": diff is None, "record": b, "first_difference": diff}


def relation(run_dir: str | Path, oracle_dir: str | Path) -> dict:
    """Every term of E between a run and its oracle; each names its first differing element."""
    run_dir, oracle_dir = Path(run_dir), Path(oracle_dir)
    cmp = compare(run_dir, oracle_dir)
    terms = {
        "logits": _logits_term(run_dir, oracle_dir, cmp),
        "tokens": {"equal": cmp.tokens_equal, "tokens": len(_tokens(oracle_dir)),
                   "first_difference": None if cmp.tokens_equal else cmp.detail or "token lists differ"},
        "response": _response_term(run_dir, oracle_dir),
        "routes": _routes_term(run_dir, oracle_dir),
        "consumer": _record_term(run_dir, oracle_dir, "consumer"),
        "destination": _record_term(run_dir, oracle_dir, "destination"),
    }
    for name, t in terms.items():
        t["predicate"] = PREDICATES[name]
    return {"relation": RELATION, "terms": terms, "exact": all(t["equal"] for t in terms.values()),
            "horizon": {"outputs": len(_tokens(oracle_dir)), "logit_rows": cmp.rows_compared}}
