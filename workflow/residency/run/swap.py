"""A swap file for the duration of one cell: made, enabled, and always removed.

The reclaim-authority cells (reference 000, claim 3) need swap available to their cgroup:
without it the kernel has nowhere to put the pager's anonymous pages and cannot take them.
The machines this pipeline runs on have no swap by default, and every other cell is graded
`hard` only with swap off, so swap exists only while a reclaim cell runs:

  with temporary_swap(directory, size_bytes) as sw: ...   # mkswap + swapon, then swapoff + rm

The file is named residency-swap-<pid of the harness>-<random>.img. A harness killed with
SIGKILL cannot swapoff its own; `sweep_stale` (called before a new one is made, and by every
harness run) turns off and removes those whose harness is gone, so swap never stays on.

Needs root (swapon(2) needs CAP_SYS_ADMIN) and a file system that supports swap files (ext4,
xfs; not tmpfs or overlayfs): otherwise SwapUnavailable says why in one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

PREFIX = "residency-swap-"
PROC_SWAPS = Path("/proc/swaps")
_NAME = re.compile(rf"^{re.escape(PREFIX)}(\d+)-[0-9a-f]+\.img$")
_WRITE_BLOCK = 1 << 20


class SwapUnavailable(RuntimeError):
    """No swap file can be made and enabled here; the message says why, in one line."""


@dataclass
class SwapFile:
    path: str
    bytes: int


def active_files(proc_swaps: Path = PROC_SWAPS) -> list[str]:
    """The swap areas the kernel has on (file or partition paths)."""
    try:
        lines = proc_swaps.read_text().splitlines()[1:]
    except OSError:
        return []
    return [line.split()[0] for line in lines if line.strip()]


def _owner(path: str) -> int | None:
    m = _NAME.match(Path(path).name)
    return int(m.group(1)) if m else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run(*cmd: str) -> None:
    tool = shutil.which(cmd[0]) or next((p for p in (f"/sbin/{cmd[0]}", f"/usr/sbin/{cmd[0]}") if os.path.exists(p)), None)
    if tool is None:
        raise SwapUnavailable(f"{cmd[0]} not found (util-linux)")
    r = subprocess.run([tool, *cmd[1:]], capture_output=True, text=True)
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise SwapUnavailable(f"{cmd[0]} {cmd[-1]}: {msg}")


def sweep_stale(directory: str | os.PathLike | None = None, proc_swaps: Path = PROC_SWAPS) -> list[str]:
    """Turn off and remove swap files of harnesses that are gone (active ones anywhere, and
    leftover files in `directory`); returns their paths."""
    swept = []
    for path in active_files(proc_swaps):
        pid = _owner(path)
        if pid is not None and not _alive(pid):
            _run("swapoff", path)
            Path(path).unlink(missing_ok=True)
            swept.append(path)
    if directory is not None and Path(directory).is_dir():
        active = set(active_files(proc_swaps))
        for f in Path(directory).glob(f"{PREFIX}*.img"):
            pid = _owner(str(f))
            if pid is not None and not _alive(pid) and str(f) not in active:
                f.unlink(missing_ok=True)
                swept.append(str(f))
    return swept


def _fill(path: Path, size: int) -> None:
    """Write the file out with zeros: a swap file must have no holes (fallocate'd extents
    are refused by swapon on some file systems)."""
    block = bytes(_WRITE_BLOCK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        left = size
        while left > 0:
            left -= os.write(fd, block[: min(left, _WRITE_BLOCK)])
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def temporary_swap(directory: str | os.PathLike, size_bytes: int) -> Iterator[SwapFile]:
    """A swap file of `size_bytes` on while the block runs; off and removed after it,
    whatever happens inside."""
    if os.geteuid() != 0:
        raise SwapUnavailable("swapon needs root (CAP_SYS_ADMIN)")
    if size_bytes < 1 << 20:
        raise SwapUnavailable(f"swap size {size_bytes} bytes: at least 1 MiB")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    sweep_stale(d)
    path = d / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}.img"
    on = False
    try:
        _fill(path, size_bytes - size_bytes % 4096)
        _run("mkswap", str(path))
        _run("swapon", str(path))
        on = True
        yield SwapFile(str(path), size_bytes - size_bytes % 4096)
    finally:
        if on:
            _run("swapoff", str(path))
        path.unlink(missing_ok=True)
