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

What is written is read back (`Authority`): the limit is `hard` only when memory.max /
memory.limit_in_bytes reads back as the limit (page-rounded, as the kernel stores it) and
swap is verified off for the cell: v2 memory.swap.max reads back 0, v1
memory.memsw.limit_in_bytes reads back as the limit (memory + swap bounded together), or
the machine has no swap at all (SwapTotal 0 in /proc/meminfo, read when the cell is made
and again when it ends). Otherwise the reason is recorded and the harness does not grade
the run `hard`.

A cell's cgroup is named residency-<pid of its harness>-<random>. A harness killed with
SIGKILL cannot remove its own; `sweep_stale` (called before a new one is made) removes
those whose harness is gone and which hold no task.
"""

from __future__ import annotations

import errno
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from residency.run import reclaim


class CgroupUnavailable(RuntimeError):
    """No memory cgroup can be created here; the message says why, in one line."""


PREFIX = "residency-"
PAGE = os.sysconf("SC_PAGE_SIZE")
MEMINFO = Path("/proc/meminfo")
# A cgroup of the old naming (residency-<12 hex>, no owner pid) is swept only when it is
# older than this: no run of this pipeline's configs lasts an hour, so none is still live.
LEGACY_MIN_AGE_S = 3600


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


def swap_total_bytes(meminfo: Path | None = None) -> int | None:
    """SwapTotal of the machine (None when /proc/meminfo does not say)."""
    try:
        for line in (meminfo or MEMINFO).read_text().splitlines():
            if line.startswith("SwapTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@dataclass
class Authority:
    """What the kernel read back after the cell's limits were written; `hard` when the limit
    holds and swap is off, else `reasons` say what is missing."""

    limit_read_back: int | None = None
    swap_read_back: str | None = None   # v2 memory.swap.max / v1 memory.memsw.limit_in_bytes
    swap_total_bytes: int | None = None
    swap_off_by: str | None = None      # how swap was verified off for the cell
    reasons: list[str] = field(default_factory=list)

    @property
    def hard(self) -> bool:
        return not self.reasons


class Cgroup:
    """A fresh child memory cgroup for one run."""

    def __init__(self, loc: Location, limit_bytes: int | None, name: str | None = None,
                 high_bytes: int | None = None):
        self.version = loc.version
        self.parent = loc.parent
        self.limit_bytes = limit_bytes
        self.high_bytes = high_bytes  # a reclaim cell's pressure (reclaim.configure), swap available
        self.path = loc.parent / (name or f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        self.authority = Authority()
        try:
            self.path.mkdir()
        except OSError as exc:
            raise CgroupUnavailable(f"cannot create {self.path}: {exc.strerror}") from None
        self._pressure_fds: tuple[int, int] | None = None
        try:
            if self.high_bytes is not None:
                reclaim.configure(self.path, self.version, self.high_bytes, self.limit_bytes, _write)
                self.authority = Authority(swap_total_bytes=swap_total_bytes(), reasons=[
                    f"reclaim cell: pressure at {self.high_bytes} bytes with swap available to the cgroup, by design"])
            else:
                self._configure()
                if self.limit_bytes is not None:
                    self.authority = self._read_back()
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

    def _read_back(self) -> Authority:
        """Read the limits back as the kernel stores them (in whole pages)."""
        p, want = self.path, self.limit_bytes
        accepted = {want, want - want % PAGE}
        limit_file, swap_file = (("memory.max", "memory.swap.max") if self.version == 2
                                 else ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"))
        a = Authority(swap_total_bytes=swap_total_bytes())
        got = _read(p / limit_file)
        a.limit_read_back = int(got) if got.isdigit() else None
        if a.limit_read_back not in accepted:
            a.reasons.append(f"{limit_file} reads back {got!r}, not the limit {want}")
        if (p / swap_file).exists():
            a.swap_read_back = _read(p / swap_file)
            if self.version == 2 and a.swap_read_back == "0":
                a.swap_off_by = "memory.swap.max = 0"
            elif self.version == 1 and a.swap_read_back.isdigit() and int(a.swap_read_back) in accepted:
                a.swap_off_by = "memory.memsw.limit_in_bytes = the limit"
        if a.swap_off_by is None and a.swap_total_bytes == 0:
            a.swap_off_by = "no swap on the machine (SwapTotal 0)"
        if a.swap_off_by is None:
            a.reasons.append(f"swap not verified off: {swap_file} "
                             + (f"reads back {a.swap_read_back!r}" if a.swap_read_back is not None else "absent")
                             + f", SwapTotal {a.swap_total_bytes} bytes")
        return a

    def authority_at_end(self) -> Authority:
        """The authority the run had: when it rested on the machine having no swap, swap
        must still be absent when the run ends."""
        a = self.authority
        if a.swap_off_by and a.swap_off_by.startswith("no swap") and (swap_total_bytes() or 0) > 0:
            a.reasons.append("swap was enabled on the machine during the run (SwapTotal > 0 at its end)")
            a.swap_off_by = None
        return a

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


def _owner_alive(name: str) -> bool | None:
    """Whether the harness a cgroup is named after still runs (None: the old naming, no pid)."""
    pid = name[len(PREFIX):].split("-", 1)[0]
    if not pid.isdigit() or "-" not in name[len(PREFIX):]:
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a live process of another user
    return True


def _remove_dir(d: Path) -> None:
    d.rmdir()  # on cgroupfs the control files go with the directory


def sweep_stale(parent: Path, now: float | None = None) -> list[str]:
    """Remove the cgroups of this harness under `parent` that a killed run left behind: named
    residency-*, holding no task, their harness gone (or, old naming, older than an hour).
    Returns the names removed."""
    removed = []
    now = time.time() if now is None else now
    for d in sorted(parent.glob(f"{PREFIX}*")):
        if not d.is_dir():
            continue
        alive = _owner_alive(d.name)
        if alive or (alive is None and now - d.stat().st_mtime < LEGACY_MIN_AGE_S):
            continue
        try:
            if _read(d / "cgroup.procs"):
                continue  # a task is still inside: not ours to end
            _remove_dir(d)
        except OSError:
            continue  # gone already, or the kernel still drains it: the next sweep retries
        removed.append(d.name)
    return removed


def probe_writable(parent_override: str | None = None) -> tuple[Location | None, str]:
    """(location, '') if a child memory cgroup can be made and limited here, else (None, why)."""
    try:
        loc = locate(parent_override)
        cg = Cgroup(loc, limit_bytes=64 << 20)
        cg.remove()
        return loc, ""
    except CgroupUnavailable as exc:
        return None, str(exc)
