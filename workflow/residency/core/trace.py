"""Reading `trace.bin`, the engine's chunk event trace (format: docs/run-contract.md)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

MAGIC = b"RSTRACE1"
HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("record_size", "<u4"),
                   ("chunk_size", "<u8"), ("chunks", "<u8")])
RECORD = np.dtype([("step", "<u4"), ("chunk", "<u4"), ("kind", "u1"), ("flags", "u1"),
                   ("reserved", "<u2"), ("aux", "<u4")])

ACCESS, FILL_DEMAND, FILL_PREFETCH, EVICT, SIGNAL = 1, 2, 3, 4, 5
FLAG_MISS = 1


class TraceError(ValueError):
    pass


@dataclass
class Trace:
    chunk_size: int
    chunks: int
    records: np.ndarray

    @property
    def accesses(self) -> np.ndarray:
        return self.records[self.records["kind"] == ACCESS]

    def reference(self) -> list[int]:
        """The workload's reference trace: accessed chunks in step order (Belady's input)."""
        return self.accesses["chunk"].astype(np.int64).tolist()

    def reference_steps(self) -> list[int]:
        """The step of each access of `reference()`."""
        return self.accesses["step"].astype(np.int64).tolist()

    def outcomes_sha256(self) -> str:
        """Digest of the access outcomes (step, chunk, miss) in order: what the policy's
        decisions did to the workload, without the fill, eviction and signal records, whose
        step stamps follow the pager's cursor (with free-running drivers, timing moves them
        even for a policy that ignores the signal)."""
        acc = self.accesses
        rows = np.stack([acc["step"], acc["chunk"], acc["flags"] & FLAG_MISS]).T.astype("<u4")
        return hashlib.sha256(rows.tobytes()).hexdigest()


def read(path: str | os.PathLike) -> Trace:
    raw = open(path, "rb").read()
    if len(raw) < HEADER.itemsize:
        raise TraceError(f"{path}: shorter than the trace header")
    head = np.frombuffer(raw[: HEADER.itemsize], dtype=HEADER)[0]
    if head["magic"] != MAGIC or int(head["version"]) != 1 or int(head["record_size"]) != RECORD.itemsize:
        raise TraceError(f"{path}: not a version-1 residctl trace")
    if int(head["chunks"]) > 2**32:  # chunk ids are u32 (a corrupt header, not a trace)
        raise TraceError(f"{path}: a header of {int(head['chunks'])} chunks, more than a u32 chunk id can name")
    body = raw[HEADER.itemsize:]
    if len(body) % RECORD.itemsize:
        raise TraceError(f"{path}: truncated record ({len(body)} bytes of records)")
    return Trace(int(head["chunk_size"]), int(head["chunks"]), np.frombuffer(body, dtype=RECORD))
