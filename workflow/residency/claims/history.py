"""The claim history: one line per computation of a claim, never rewritten.

`claims/history/<ID>.jsonl` gets one JSON line each time `residency claim` computes a
record: `{"time" (UTC, ISO 8601), "id", "verdict", "record_sha256", "scope_sha256",
"settings_sha256", "protocol_sha256"}`. A rerun that gives another verdict therefore
never replaces the earlier one silently: the ledger counts the computations on the
record's scope and the verdicts they gave. Each line is appended with a single write on a
descriptor opened with O_APPEND, so concurrent writers never interleave within a line,
and a crash leaves at most a torn last line, which reading reports as corrupt.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections import Counter
from pathlib import Path

from residency.core.identity import digest, sha256_file

HISTORY_DIR = "history"
FIELDS = ("time", "id", "verdict", "record_sha256", "scope_sha256", "settings_sha256", "protocol_sha256")
VERDICTS = ("pass", "fail", "insufficient-evidence")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class HistoryError(ValueError):
    """A history file that cannot be read as history lines: the message is one line."""


def path_for(record_path: str | os.PathLike, claim_id: str) -> Path:
    """claims/history/<ID>.jsonl next to the record claims/<ID>.json."""
    return Path(record_path).parent / HISTORY_DIR / f"{claim_id}.jsonl"


def scope_digest(doc: dict) -> str:
    return digest(doc["scope"])


def entry_of(doc: dict, record_path: str | os.PathLike) -> dict:
    """The history line of the record `doc` just written at `record_path`."""
    return {
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"),
        "id": doc["id"],
        "verdict": doc["verdict"],
        "record_sha256": sha256_file(record_path),
        "scope_sha256": scope_digest(doc),
        "settings_sha256": digest(doc.get("settings")),
        "protocol_sha256": digest(doc.get("protocol")),
    }


def append(path: str | os.PathLike, entry: dict) -> None:
    """Append `entry` as one line with one write(2) under O_APPEND, then fsync."""
    line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        written = os.write(fd, line)
        if written != len(line):  # a regular file takes a whole write or fails; never leave it torn quietly
            raise HistoryError(f"{path}: short append ({written} of {len(line)} bytes): the last line is torn")
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse(path: Path, n: int, text: str) -> dict:
    try:
        entry = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryError(f"{path}:{n}: corrupt history line ({exc.msg})") from None
    if not isinstance(entry, dict) or any(k not in entry for k in FIELDS):
        raise HistoryError(f"{path}:{n}: corrupt history line (needs {', '.join(FIELDS)})")
    if entry["verdict"] not in VERDICTS:
        raise HistoryError(f"{path}:{n}: corrupt history line (verdict {entry['verdict']!r})")
    bad = [k for k in FIELDS if k.endswith("_sha256") and not _HEX64.match(str(entry[k]))]
    if bad:
        raise HistoryError(f"{path}:{n}: corrupt history line ({bad[0]} is not a sha256)")
    return entry


def read(path: str | os.PathLike) -> list[dict]:
    """Every line of a history file ([] when there is none); HistoryError on a corrupt line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    if raw and not raw.endswith(b"\n"):
        last = raw.count(b"\n") + 1
        raise HistoryError(f"{path}:{last}: corrupt history line (torn: no end of line)")
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise HistoryError(f"{path}: corrupt history (not UTF-8)") from None
    return [_parse(path, n, text) for n, text in enumerate(lines, 1)]


def tally(entries: list[dict], scope_sha256: str) -> dict:
    """How often the claim was computed on this scope and what it gave, and in all."""
    on_scope = [e for e in entries if e["scope_sha256"] == scope_sha256]
    return {
        "computed_on_scope": len(on_scope),
        "verdicts_on_scope": dict(sorted(Counter(e["verdict"] for e in on_scope).items())),
        "computed_in_all": len(entries),
    }
