"""Atomic output: every file the pipeline writes appears whole or not at all.

A writer fills a temporary file in the destination directory, fsyncs it and renames it
over the destination, so an interrupted run never leaves a half-written Parquet table,
figure or claim record behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to `dest`; rename it onto `dest` if the block succeeds."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix or ".tmp", dir=dest.parent)
    os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs are for every reader
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, dest)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_bytes(dest: str | os.PathLike, data: bytes) -> None:
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)


def write_text(dest: str | os.PathLike, text: str) -> None:
    write_bytes(dest, text.encode("utf-8"))


def write_json(dest: str | os.PathLike, obj: Any) -> None:
    write_text(dest, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_parquet(dest: str | os.PathLike, table) -> None:
    """Write a pyarrow Table atomically."""
    import pyarrow.parquet as pq

    with atomic_path(dest, suffix=".parquet") as tmp:
        pq.write_table(table, tmp)
