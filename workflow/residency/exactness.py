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
