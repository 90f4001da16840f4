"""Host memory authority: one memory cgroup per run, cgroup v2 or v1.

The harness puts the whole process tree of a run into a fresh child of the current
process's memory cgroup, with a hard limit and swap off, and reads the kernel's own
counters when the run ends:

  v2: memory.max, memory.swap.max = 0, memory.peak, memory.events (max, oom, oom_kill)
  v1: memory.limit_in_bytes, memory.memsw.limit_in_bytes, memory.max_usage_in_bytes,
      memory.failcnt (the limit-event count), memory.oom_control (oom_kill), and
      vmpressure events (cgroup.event_control on memory.pressure_level, level "low"):
      on the development kernel (6.18, v1) memory.failcnt stayed 0 while a cell was
      reclaimed at its limit, whereas vmpressure fired once per reclaim pass, so the
      harness records both and counts either as a limit event.

A fresh cgroup per run means the peak starts at zero and every counter belongs to the run.
Where no child cgroup can be made, `open_cgroup` says why and the harness grades the run
`unenforced`.
"""

from __future__ import annotations

import errno
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path


class CgroupUnavailable(RuntimeError):
    """No memory cgroup can be created here; the message says why, in one line."""


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(value)
    except OSError as exc:
        raise CgroupUnavailable(f"cannot write {value!r} to {path}: {exc.strerror}") from None


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fstype, super options) for every cgroup mount, from mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields = left.split()
            rfields = right.split()
            if len(fields) < 5 or len(rfields) < 3:
                continue
            fstype, superopts = rfields[0], rfields[2]
            if fstype in ("cgroup", "cgroup2"):
                out.append((fields[4].replace("\\040", " "), fstype, superopts))
    return out


def _self_cgroups() -> dict[str, str]:
    """Controller list -> path, from /proc/self/cgroup ('' is the v2 unified entry)."""
    out = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _hid, ctrls, path = line.rstrip("\n").split(":", 2)
            out[ctrls] = path
    return out


@dataclass
class Location:
    """Where children of the current memory cgroup can be made."""

    version: int
    parent: Path


def locate(parent_override: str | None = None) -> Location:
    """Find the memory cgroup this process is in (v2 preferred when it has the memory controller)."""
    if parent_override:
        p = Path(parent_override)
        if (p / "cgroup.controllers").exists():
            return Location(2, p)
        if (p / "memory.limit_in_bytes").exists():
            return Location(1, p)
        raise CgroupUnavailable(f"{p} is not a memory cgroup directory")
    mounts = _mounts()
    selfcg = _self_cgroups()
    reasons = []
    if "" in selfcg:
        for mnt, fstype, _ in mounts:
            if fstype != "cgroup2":
                continue
            here = Path(mnt) / selfcg[""].lstrip("/")
            ctrl = here / "cgroup.controllers"
            if ctrl.exists() and "memory" in _read(ctrl).split():
                _enable_memory_for_children(here)
                return Location(2, here)
            reasons.append(f"cgroup v2 at {mnt} has no memory controller for {here}")
    for ctrls, path in selfcg.items():
        if "memory" not in ctrls.split(","):
            continue
        for mnt, fstype, opts in mounts:
            if fstype == "cgroup" and "memory" in opts.split(","):
                here = Path(mnt) / path.lstrip("/")
                if (here / "memory.limit_in_bytes").exists():
                    return Location(1, here)
        reasons.append("cgroup v1 memory hierarchy is not mounted")
    raise CgroupUnavailable("no memory cgroup found (" + "; ".join(reasons or ["no cgroup entries"]) + ")")


def _enable_memory_for_children(here: Path) -> None:
    """v2: children get a memory.max only if the parent delegates the memory controller."""
    sub = here / "cgroup.subtree_control"
    if "memory" in _read(sub).split():
        return
    try:
        with open(sub, "w") as fh:
            fh.write("+memory")
    except OSError as exc:
        raise CgroupUnavailable(
            f"cannot enable the memory controller for children of {here} ({exc.strerror}); "
            "run inside a delegated cgroup (e.g. systemd-run --user --scope -p Delegate=yes) "
            "or set harness.cgroup_parent"
        ) from None


@dataclass
class Counters:
    """What the kernel says about a run's cgroup when it ends."""

    version: int
    path: str
    limit_bytes: int | None
    peak_bytes: int | None
    limit_events: int | None
    oom_events: int | None
    oom_kills: int | None
    swap_peak_bytes: int | None = None
    pressure_events: int | None = None
    notes: list[str] = field(default_factory=list)


class Cgroup:
    """A fresh child memory cgroup for one run."""

    def __init__(self, loc: Location, limit_bytes: int | None, name: str | None = None):
        self.version = loc.version
        self.parent = loc.parent
        self.limit_bytes = limit_bytes
        self.path = loc.parent / (name or f"residency-{uuid.uuid4().hex[:12]}")
        try:
            self.path.mkdir()
        except OSError as exc:
            raise CgroupUnavailable(f"cannot create {self.path}: {exc.strerror}") from None
        self._pressure_fds: tuple[int, int] | None = None
        try:
            self._configure()
            if self.version == 1:
                self._listen_pressure()
        except Exception:
            try:
                self.remove(timeout_s=1.0)
            except CgroupUnavailable:
                pass  # the configuration error is the one to report
            raise

    def _configure(self) -> None:
        p = self.path
        if self.version == 2:
            if self.limit_bytes is not None:
                _write(p / "memory.max", str(self.limit_bytes))
            if (p / "memory.swap.max").exists():
                _write(p / "memory.swap.max", "0")
            if (p / "memory.oom.group").exists():
                _write(p / "memory.oom.group", "1")
        else:
            if self.limit_bytes is not None:
                _write(p / "memory.limit_in_bytes", str(self.limit_bytes))
                # memsw (memory + swap) no higher than memory: swap off for the cell.
                if (p / "memory.memsw.limit_in_bytes").exists():
                    _write(p / "memory.memsw.limit_in_bytes", str(self.limit_bytes))
            if (p / "memory.swappiness").exists():
                try:
                    _write(p / "memory.swappiness", "0")
                except CgroupUnavailable:
                    pass  # not writable under some hierarchies; swap is bounded by memsw anyway

    def _listen_pressure(self) -> None:
        """v1: count vmpressure 'low' events, i.e. reclaim passes inside this cgroup."""
        level = self.path / "memory.pressure_level"
        if not level.exists():
            return
        efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        pfd = os.open(level, os.O_RDONLY | os.O_CLOEXEC)
        self._pressure_fds = (efd, pfd)
        _write(self.path / "cgroup.event_control", f"{efd} {pfd} low")

    def _pressure_count(self) -> int | None:
        if self._pressure_fds is None:
            return None
        try:
            return os.eventfd_read(self._pressure_fds[0])
        except BlockingIOError:
            return 0

    def _close_pressure(self) -> None:
        if self._pressure_fds is not None:
            for fd in self._pressure_fds:
                os.close(fd)
            self._pressure_fds = None

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def enter(self, pid: int | None = None) -> None:
        """Move `pid` (default: the calling process) into the cgroup."""
        _write(self.procs_file, str(pid if pid is not None else os.getpid()))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in _read(self.procs_file).split()]
        except FileNotFoundError:
            return []

    def counters(self) -> Counters:
        p = self.path
        notes: list[str] = []

        def num(name: str) -> int | None:
            f = p / name
            if not f.exists():
                notes.append(f"{name} absent")
                return None
            v = _read(f)
            return None if v == "max" else int(v)

        if self.version == 2:
            events = _kv(p / "memory.events")
            return Counters(
                version=2, path=str(p), limit_bytes=self.limit_bytes,
                peak_bytes=num("memory.peak"),
                limit_events=events.get("max"), oom_events=events.get("oom"),
                oom_kills=events.get("oom_kill"),
                swap_peak_bytes=num("memory.swap.peak") if (p / "memory.swap.peak").exists() else None,
                notes=notes,
            )
        oom = _kv(p / "memory.oom_control")
        return Counters(
            version=1, path=str(p), limit_bytes=self.limit_bytes,
            peak_bytes=num("memory.max_usage_in_bytes"),
            limit_events=num("memory.failcnt"),
            oom_events=oom.get("under_oom"),
            oom_kills=oom.get("oom_kill"),
            swap_peak_bytes=None,
            pressure_events=self._pressure_count(),
            notes=notes,
        )

    def kill_all(self) -> None:
        if self.version == 2 and (self.path / "cgroup.kill").exists():
            try:
                _write(self.path / "cgroup.kill", "1")
                return
            except CgroupUnavailable:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self, timeout_s: float = 10.0) -> None:
        """Kill what is left inside and remove the directory; retried while it drains."""
        self._close_pressure()
        if not self.path.exists():
            return
        self.kill_all()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > deadline:
                    raise CgroupUnavailable(f"cannot remove {self.path}: {exc.strerror}") from None
                self.kill_all()
                time.sleep(0.05)


def _kv(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    if not path.exists():
        return out
    for line in _read(path).splitlines():
        k, _, v = line.partition(" ")
        try:
            out[k] = int(v)
        except ValueError:
            pass
    return out


def probe_writable(parent_override: str | None = None) -> tuple[Location | None, str]:
    """(location, '') if a child memory cgroup can be made and limited here, else (None, why)."""
    try:
        loc = locate(parent_override)
        cg = Cgroup(loc, limit_bytes=64 << 20)
        cg.remove()
        return loc, ""
    except CgroupUnavailable as exc:
        return None, str(exc)
