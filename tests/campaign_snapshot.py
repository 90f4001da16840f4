"""A finished tiny campaign kept under .build/, keyed by everything its outputs depend on, so
`make test-cluster` compares the SLURM run with the local run `make test` just made instead of
running the same local campaign a second time (CI runs one after the other).

The key is a digest of: the tiny config, every file git lists (tracked or untracked and not
ignored) under the pipeline's sources (Snakefile, workflow/, config/, engine/, tests/conftest.py,
requirements.txt, pyproject.toml), the engine binary the campaign runs, the llama.cpp build's
identity, the Python, and the host and kernel. A change in any of them is another key, so a
snapshot never outlives its inputs; only the newest key is kept. Outside a git checkout there is
no key and nothing is reused.

The snapshot is taken right after `snakemake figures` succeeds, before any test edits the
campaign (the report, README and single-claim tests change it), and published by a rename, so
an interrupted copy is never taken for a snapshot.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / ".build" / "tiny-campaign"
SOURCES = ["Snakefile", "workflow", "config", "engine", "tests/conftest.py", "requirements.txt", "pyproject.toml"]


def _digest_file(h, path: Path) -> None:
    h.update(str(path).encode() + b"\0")
    if path.is_file():
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    h.update(b"\0")


def key(config: dict, engine_dir: str) -> str | None:
    """The digest of the campaign's inputs, or None outside a git checkout."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z", "--", *SOURCES],
                            capture_output=True)
    if listed.returncode != 0:
        return None
    h = hashlib.sha256()
    h.update(yaml.safe_dump(config, sort_keys=True).encode())
    for rel in sorted(p for p in listed.stdout.decode().split("\0") if p):
        _digest_file(h, ROOT / rel)  # git lists paths relative to the checkout
    llama_identity = Path(config["llama"]["build_dir"]) / "install" / "llama-identity.json"
    for built in (Path(engine_dir) / "residctl", llama_identity):
        _digest_file(h, built)
    h.update(f"{sys.version}|{platform.node()}|{platform.release()}".encode())
    return h.hexdigest()[:32]


def find(k: str | None) -> Path | None:
    """The snapshot's campaign folder for key `k`, if one was published."""
    if k is None:
        return None
    work = STORE / k / "pipeline"
    return work if (STORE / k / "DONE").is_file() else None


def publish(k: str | None, work: Path) -> None:
    """Copy the finished campaign `work` to the store under `k`, replacing any other key."""
    if k is None:
        return
    STORE.mkdir(parents=True, exist_ok=True)
    partial = STORE / f".{k}.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(work, partial / "pipeline", symlinks=True)
    (partial / "DONE").write_text(f"copied from {work}\n")
    for old in STORE.iterdir():
        if old.name != partial.name:
            shutil.rmtree(old, ignore_errors=True)
    partial.rename(STORE / k)
