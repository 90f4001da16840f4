"""Claim records (docs/design.md): building, evaluating assertions, verifying, replaying.

A claim module computes `values` from Parquet and states `assertions` about them (the
reference document's qualitative statement, tested on this machine's numbers). The
verdict follows mechanically: `insufficient-evidence` when the module says its evidence is
missing or unfit (its values then say nothing either way); else `fail` when an assertion
does not hold (the claim asserts every half of its statement: one false half makes it
false, also when another half's value is missing); else `insufficient-evidence` when an
assertion points at a missing value; `pass` otherwise. The reference's own numbers live in `reference_statement` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpointer

from residency.core import atomic
from residency.core.identity import sha256_file

SCHEMA_VERSION = 1
OPS = ("eq", "approx", "lt", "le", "gt", "ge", "all_true")


@dataclass
class Assertion:
    pointer: str
    op: str
    value: Any = None
    tolerance: float | None = None
    why: str = ""  # what the assertion means, said in the reasons when it fails

    def as_dict(self) -> dict:
        d = {"pointer": self.pointer, "op": self.op, "value": self.value}
        if self.tolerance is not None:
            d["tolerance"] = self.tolerance
        if self.why:
            d["why"] = self.why
        return d


@dataclass
class ClaimResult:
    """What a claim module computes from its inputs."""

    headline: str
    values: dict
    assertions: list[Assertion]
    insufficient: list[str] = field(default_factory=list)  # reasons evidence is missing


class PointerError(KeyError):
    """An assertion's pointer names no value of the record."""


def resolve(doc: Any, pointer: str) -> Any:
    """RFC 6901 JSON pointer lookup (the jsonpointer package); PointerError when it names nothing."""
    try:
        got = jsonpointer.resolve_pointer(doc, pointer)
    except jsonpointer.JsonPointerException as exc:
        raise PointerError(f"{pointer!r}: {exc}") from None
    if isinstance(got, jsonpointer.EndOfList):  # '-' names the item after the last: there is none
        raise PointerError(f"{pointer!r}: past the end of a list")
    return got


def check(assertion: dict, doc: dict) -> tuple[bool | None, str]:
    """(True/False, '') when evaluable, (None, why) when the value is missing."""
    ptr, op, want = assertion["pointer"], assertion["op"], assertion.get("value")
    try:
        got = resolve(doc, ptr)
    except PointerError:
        return None, f"{ptr}: no such value"
    if got is None or (isinstance(got, float) and math.isnan(got)):
        return None, f"{ptr}: value missing"
    if op == "all_true":
        if not isinstance(got, list) or not got:
            return None, f"{ptr}: no items to check"
        bad = [i for i, v in enumerate(got) if v is not True]
        return (not bad), (f"{ptr}: {len(bad)} of {len(got)} items false (first at index {bad[0]})" if bad else "")
    if op == "eq":
        ok = got == want
    elif op == "approx":
        tol = float(assertion.get("tolerance") or 0.0)
        ok = abs(float(got) - float(want)) <= tol
    elif op == "lt":
        ok = got < want
    elif op == "le":
        ok = got <= want
    elif op == "gt":
        ok = got > want
    elif op == "ge":
        ok = got >= want
    else:
        raise ValueError(f"unknown assertion op {op!r}")
    extra = f" ± {assertion.get('tolerance')}" if op == "approx" else ""
    return ok, ("" if ok else f"{ptr} = {got!r}, expected {op} {want!r}{extra}")


def verdict_of(doc: dict, insufficient: list[str]) -> tuple[str, list[str]]:
    reasons = list(insufficient)
    failed = unevaluable = False
    for a in doc["assertions"]:
        ok, why = check(a, doc)
        if ok is None:
            unevaluable = True
            reasons.append(f"unevaluable: {why}" + (f" ({a['why']})" if a.get("why") else ""))
        elif not ok:
            failed = True
            reasons.append(f"failed: {why}" + (f" ({a['why']})" if a.get("why") else ""))
    if insufficient:
        return "insufficient-evidence", reasons
    if failed:
        return "fail", reasons
    return ("insufficient-evidence" if unevaluable else "pass"), reasons


def plain(obj: Any) -> Any:
    """JSON-safe values: NaN and missing become null, numpy scalars become Python ones."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()  # numpy scalar
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is not None and not isinstance(obj, (str, int, float, bool)):
        try:
            if obj != obj:  # pandas NA / NaT
                return None
        except TypeError:
            return None
    return obj


def build(claim_id: str, reference_statement: str, result: ClaimResult, inputs: list[str],
          scope: dict, settings: dict, root: Path, protocol: dict | None = None) -> dict:
    """The record; `settings` are the thresholds (config `claims:`), `protocol` the campaign
    design the inputs were made under (protocol.py), both fixed before the runs."""
    result.values = plain(result.values)
    scope = plain(scope)
    doc = {
        "id": claim_id,
        "schema_version": SCHEMA_VERSION,
        "headline": result.headline,
        "reference_statement": reference_statement,
        "scope": scope,
        "inputs": [{"path": p, "sha256": sha256_file(root / p)} for p in inputs],
        "settings": settings,
        "protocol": plain(protocol),
        "values": result.values,
        "assertions": [a.as_dict() for a in result.assertions],
    }
    doc["verdict"], doc["reasons"] = verdict_of(doc, result.insufficient)
    doc["insufficient"] = list(result.insufficient)
    doc["commands"] = {
        "regenerate": f"snakemake --cores 1 claims/{claim_id}.json",
        "verify": f"residency verify --claim {claim_id}",
        "replay": f"residency replay --claim {claim_id}",
    }
    return doc


def write(doc: dict, path: str | Path) -> None:
    atomic.write_json(path, doc)


def as_int(v) -> int | None:
    """A Parquet cell as a JSON int (None for null/NaN)."""
    return None if v is None or v != v else int(v)


def as_text(v) -> str | None:
    """A Parquet text cell as a JSON string (None for null: pandas reads a missing string as NaN)."""
    return None if v is None or v != v else str(v)


def as_float(v) -> float | None:
    return None if v is None or v != v else float(v)


def fmt(v, spec: str = ".3f") -> str:
    return "n/a" if v is None else format(v, spec)
