"""Run manifests: `manifest.json`, the last file of every run directory.

`{"schema_version": 1, "files": [{"name", "bytes", "sha256"}, ...]}` lists every regular
file of the directory but itself and temporaries (names ending in `.tmp`), sorted by name;
the same format the engine writes (docs/run-contract.md). A directory without one is
incomplete: the run never finished being recorded. A file that no longer matches its
entry was changed after the run. Parquet rows carry the manifest's own sha256, so a claim
reaches every raw byte behind it by digest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from residency.core import atomic
from residency.core.identity import sha256_file

MANIFEST_FILE = "manifest.json"
SCHEMA_VERSION = 1


class ManifestError(ValueError):
    """A manifest that is unreadable or does not match its directory: the message is one line."""


class ManifestMissing(ManifestError):
    """The run directory has no manifest.json: it is incomplete."""


def _listed_names(run_dir: Path) -> list[str]:
    return sorted(e.name for e in os.scandir(run_dir)
                  if e.is_file(follow_symlinks=False) and e.name != MANIFEST_FILE and not e.name.endswith(".tmp"))


def entries(run_dir: str | os.PathLike) -> list[dict]:
    """What the manifest of `run_dir` says now: each file's name, size and sha256."""
    run_dir = Path(run_dir)
    return [{"name": n, "bytes": (run_dir / n).stat().st_size, "sha256": sha256_file(run_dir / n)}
            for n in _listed_names(run_dir)]


def write(run_dir: str | os.PathLike) -> str:
    """(Re)write DIR/manifest.json atomically over every file of DIR; return its sha256."""
    path = Path(run_dir) / MANIFEST_FILE
    atomic.write_json(path, {"schema_version": SCHEMA_VERSION, "files": entries(run_dir)})
    return sha256_file(path)


def read(run_dir: str | os.PathLike) -> dict[str, dict]:
    """The manifest's entries by file name; ManifestMissing / ManifestError with one line."""
    path = Path(run_dir) / MANIFEST_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestMissing(f"{run_dir}: no {MANIFEST_FILE}: the run directory is incomplete") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: unreadable ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION or not isinstance(doc.get("files"), list):
        raise ManifestError(f"{path}: not a schema_version {SCHEMA_VERSION} manifest")
    try:
        return {str(e["name"]): {"bytes": int(e["bytes"]), "sha256": str(e["sha256"])} for e in doc["files"]}
    except (KeyError, TypeError, ValueError):
        raise ManifestError(f"{path}: an entry lacks name, bytes or sha256") from None


def problems(run_dir: str | os.PathLike, expect_sha256: str | None = None, ignore: tuple[str, ...] = ()) -> list[str]:
    """One line per file of `run_dir` that differs from its manifest (and one if the
    manifest is not the one whose digest `expect_sha256` a table recorded). Empty: intact.
    `ignore` names files not to compare (the harness checking the engine's manifest)."""
    run_dir = Path(run_dir)
    listed = read(run_dir)
    out = []
    if expect_sha256 is not None:
        got = sha256_file(run_dir / MANIFEST_FILE)
        if got != expect_sha256:
            out.append(f"{run_dir}/{MANIFEST_FILE}: sha256 {got[:16]}, the table gathered {expect_sha256[:16]}: "
                       "rewritten since it was gathered")
    for name, want in sorted(listed.items()):
        if name in ignore:
            continue
        p = run_dir / name
        if not p.is_file():
            out.append(f"{p}: missing (listed in {MANIFEST_FILE})")
        elif p.stat().st_size != want["bytes"]:
            out.append(f"{p}: {p.stat().st_size} bytes, {MANIFEST_FILE} says {want['bytes']}: changed since the run")
        elif (got := sha256_file(p)) != want["sha256"]:
            out.append(f"{p}: sha256 {got[:16]}, {MANIFEST_FILE} says {want['sha256'][:16]}: changed since the run")
    out += [f"{run_dir / n}: not listed in {MANIFEST_FILE}: added since the run"
            for n in _listed_names(run_dir) if n not in listed and n not in ignore]
    return out


def verified(run_dir: str | os.PathLike) -> tuple[str, dict[str, dict]]:
    """(sha256 of manifest.json, its entries) after checking every file against it;
    ManifestMissing when there is none, ManifestError naming the first file that differs."""
    found = problems(run_dir)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ManifestError(found[0] + more)
    return sha256_file(Path(run_dir) / MANIFEST_FILE), read(run_dir)
