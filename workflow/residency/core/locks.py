"""Snakemake's directory lock, told apart from a stale one.

Snakemake locks a working directory with files under .snakemake/locks/ and removes them
when it ends; a run killed with SIGKILL leaves them, and the next run then says "Directory
cannot be locked. Another Snakemake instance is running", which is not so. A lock is stale
when no live Snakemake process works in that directory (its cwd), other than the caller and
its ancestors; only a stale lock is ever cleared.
"""

from __future__ import annotations

import os
from pathlib import Path

LOCKS = Path(".snakemake") / "locks"


def _lineage() -> set[int]:
    """This process and its ancestors (a Snakefile is parsed inside the Snakemake it locks for)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        pid = int(next((ln.split()[1] for ln in status.splitlines() if ln.startswith("PPid:")), "0"))
    return pids


def _is_snakemake(pid: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(Path(a.decode(errors="replace")).name in ("snakemake", "snakemake.__main__") or a == b"snakemake"
               for a in argv[:3])


def holders(workdir: str | os.PathLike) -> list[int]:
    """Live Snakemake processes working in `workdir`, the caller's own lineage left out."""
    want, mine, found = os.path.realpath(workdir), _lineage(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine or not _is_snakemake(entry.name):
            continue
        try:
            if os.path.realpath(os.readlink(entry / "cwd")) == want:
                found.append(int(entry.name))
        except OSError:
            continue  # gone, or not ours to read
    return sorted(found)


def lock_files(workdir: str | os.PathLike) -> list[Path]:
    d = Path(workdir) / LOCKS
    return sorted(d.glob("*.lock")) if d.is_dir() else []


def state(workdir: str | os.PathLike) -> tuple[str, list[int]]:
    """("none" | "held" | "stale", the holders' pids)."""
    if not lock_files(workdir):
        return "none", []
    pids = holders(workdir)
    return ("held" if pids else "stale"), pids


def stale_note(workdir: str | os.PathLike) -> str | None:
    """One line when `workdir` holds a stale lock, naming the command that clears it."""
    what, _ = state(workdir)
    if what != "stale":
        return None
    return (f"note: {Path(workdir).resolve() / LOCKS} is a stale lock (no Snakemake process runs in "
            f"{Path(workdir).resolve()}; a run was killed): clear it with `residency unlock`")


def clear_stale(workdir: str | os.PathLike) -> tuple[str, list[int]]:
    """Remove the lock files when the lock is stale; a held lock is left alone."""
    what, pids = state(workdir)
    if what == "stale":
        for f in lock_files(workdir):
            f.unlink(missing_ok=True)
    return what, pids
