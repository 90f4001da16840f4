"""One run cell measures at a time on a host, whichever process started it.

Snakemake's `storage_exclusive` resource keeps a campaign's run cells apart only within one
Snakemake process: two campaigns on one host (two checkouts, two configs, make test's two
workers) would run cells side by side, each then measuring the other's reads and compute
threads (llama.cpp's threads spin at every barrier while a peer is descheduled: three runs of
one tiny cell side by side took 1.85-3.42 s each with two compute threads, 0.63-0.90 s with
one, 2026-12-07). The harness therefore
holds an exclusive `flock` on one host-wide file from its cgroup's creation to its removal.
The kernel releases the lock when its holder dies, so a killed harness leaves nothing to
clear. `RESIDENCY_HOST_LOCK` names another file (a test's own, so it waits on nobody).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator

ENV = "RESIDENCY_HOST_LOCK"
DEFAULT_PATH = "/tmp/residency-run-cell.lock"


def path() -> str:
    return os.environ.get(ENV) or DEFAULT_PATH


@contextlib.contextmanager
def held() -> Iterator[float]:
    """Hold the host's run-cell lock; yields the seconds spent waiting for it (0.0 when it was
    free). Opened read-only, so another user's lock file serves as well (flock needs no write
    access). Says once on stderr when it has to wait."""
    where = path()
    fd = os.open(where, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        t0 = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"residency run: waiting for another run cell on this host to finish ({where})", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield time.monotonic() - t0
    finally:
        os.close(fd)  # closing the only descriptor releases the lock
