"""A readers-writer lock on the checkout's own files, across pytest workers.

`make test` runs two pytest workers on one checkout. A test that changes a file of the
checkout (marked `changes_checkout`, e.g. the integration test that edits a module to see
what Snakemake remakes) must not run while the other worker's Snakemake reads that file:
the other run would see the edit, or a file time in the future, and fail. So every test
holds the lock shared from its set-up to its teardown (module fixtures included), and a
marked test holds it exclusively. flock(2) favours no one, so a writer first takes the
turnstile, which new readers pass through: a waiting writer gets its turn after the tests
running now, not after every later one.
"""
import contextlib
import fcntl
from pathlib import Path


@contextlib.contextmanager
def _flock(path: Path, mode: int):
    with open(path, "a+") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def held(directory: Path, exclusive: bool):
    """Hold the checkout lock (files under `directory`): shared, or exclusive for a test that
    changes the checkout."""
    directory.mkdir(parents=True, exist_ok=True)
    turnstile, lock = directory / "checkout.turnstile", directory / "checkout.lock"
    if exclusive:
        with _flock(turnstile, fcntl.LOCK_EX), _flock(lock, fcntl.LOCK_EX):
            yield
        return
    with _flock(turnstile, fcntl.LOCK_SH):
        pass  # waits while a writer waits
    with _flock(lock, fcntl.LOCK_SH):
        yield
