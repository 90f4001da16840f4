"""Lineage: how a Parquet table was made, kept in the table's own schema metadata.

A gathered table records `{"kind": "gather", "study", "run_dirs", "identity", "oracle"}`
(the arguments its gather function was called with); an analysis table records
`{"kind": "analysis", "study", "output", "source": {"path", "sha256"}}` (the table it was
computed from and that table's digest then). `residency verify --deep` follows it to make
each table again from the run directories and compare.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

KEY = b"residency.core.lineage"


def attach(table: pa.Table, lin: dict) -> pa.Table:
    """`table` with `lin` added to its schema metadata (other metadata kept)."""
    meta = dict(table.schema.metadata or {})
    meta[KEY] = json.dumps(lin, sort_keys=True).encode()
    return table.replace_schema_metadata(meta)


def of(path: str | os.PathLike) -> dict | None:
    """The lineage a Parquet file records, or None when it records none."""
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(KEY)
    return json.loads(raw) if raw is not None else None
