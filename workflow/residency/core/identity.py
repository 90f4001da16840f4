"""Identities: content digests of files and configuration, so every number can be traced
to the exact bytes (engine binary, model or region file, config) that produced it."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any


def sha256_file(path: str | os.PathLike, bufsize: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON form of `obj` (the config digest)."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()
