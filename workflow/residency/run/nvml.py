"""GPU authority: a whole-board NVML observer (pynvml) sampled during a run (docs/design.md,
reference 004 §2.1: GPU use is declared and audited, not hard-partitioned).

Every `interval_s` (default 50 ms) from the run's start to its end the observer reads, on
every board, the used memory (`nvmlDeviceGetMemoryInfo`: the whole board, whoever uses it)
and the compute processes (`nvmlDeviceGetComputeRunningProcesses`). A compute process not
in the run's own process tree is foreign. The record: the grade, the boards and their
size G_phys (the physical capacity ceiling), the declared allowance G_decl, the peak
whole-board use over the samples, the margin G_decl - peak, the foreign processes seen.

Grades: `audited` (NVML answered and found at least one board: the samples are the
evidence) or `absent` (no NVML library, no driver, or no board: G_phys = G_decl = 0, and the
reason says which). Where a board exists but a sample fails, the failure is recorded and
the grade stays `audited` only if every sample succeeded (otherwise `failed`). The NVML
module is a parameter (`nvml`), so tests drive the observer with a fake one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

DEFAULT_INTERVAL_S = 0.05


def _load_pynvml():
    import pynvml  # nvidia-ml-py, pinned in requirements.txt

    return pynvml


@dataclass
class Observation:
    grade: str                               # audited | absent | failed
    reason: str | None
    interval_s: float
    g_decl_bytes: int
    g_phys_bytes: int
    boards: list[dict] = field(default_factory=list)
    samples: int = 0
    failed_samples: int = 0
    peak_used_bytes: int | None = None
    foreign_pids: list[int] = field(default_factory=list)
    first_error: str | None = None

    def as_dict(self) -> dict:
        margin = self.g_decl_bytes - self.peak_used_bytes if self.peak_used_bytes is not None else None
        return {"grade": self.grade, "reason": self.reason, "interval_s": self.interval_s,
                "g_decl_bytes": self.g_decl_bytes, "g_phys_bytes": self.g_phys_bytes, "boards": self.boards,
                "samples": self.samples, "failed_samples": self.failed_samples,
                "peak_used_bytes": self.peak_used_bytes, "margin_bytes": margin,
                "foreign_compute_processes": len(self.foreign_pids), "foreign_pids": self.foreign_pids,
                "first_error": self.first_error}


class Observer:
    """Use as a context manager around the run: start() samples in a thread, stop() ends it."""

    def __init__(self, declared_bytes: int | None, interval_s: float = DEFAULT_INTERVAL_S,
                 own_pids: Callable[[], set[int]] | None = None, nvml=None):
        self._declared = int(declared_bytes or 0)
        self._interval = float(interval_s)
        self._root: int | None = None
        self._own = own_pids or (lambda: process_tree(self._root) if self._root else set())
        self._nvml = nvml
        self._handles: list = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._foreign: set[int] = set()
        self.obs = Observation("absent", None, self._interval, 0, 0)

    def _open(self) -> None:
        try:
            nv = self._nvml or _load_pynvml()
        except ImportError as exc:
            self.obs.reason = f"no NVML binding (pynvml): {exc}"
            return
        try:
            nv.nvmlInit()
            count = int(nv.nvmlDeviceGetCount())
        except Exception as exc:  # pynvml.NVMLError and its subclasses: no library, no driver
            self.obs.reason = f"NVML unavailable: {exc}"
            return
        if count == 0:
            self.obs.reason = "NVML found no GPU"
            self._close(nv)
            return
        self._nvml = nv
        self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        for i, h in enumerate(self._handles):
            name = nv.nvmlDeviceGetName(h)
            self.obs.boards.append({"index": i, "name": name.decode() if isinstance(name, bytes) else str(name),
                                    "total_bytes": int(nv.nvmlDeviceGetMemoryInfo(h).total)})
        self.obs.grade, self.obs.g_decl_bytes = "audited", self._declared
        self.obs.g_phys_bytes = sum(b["total_bytes"] for b in self.obs.boards)

    @staticmethod
    def _close(nv) -> None:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass

    def sample(self) -> None:
        """One whole-board observation of every board."""
        nv, used, pids = self._nvml, 0, set()
        try:
            for h in self._handles:
                used += int(nv.nvmlDeviceGetMemoryInfo(h).used)
                pids |= {int(p.pid) for p in nv.nvmlDeviceGetComputeRunningProcesses(h)}
            foreign = pids - self._own() if pids else set()
        except Exception as exc:
            self.obs.failed_samples += 1
            self.obs.first_error = self.obs.first_error or str(exc)
            return
        self.obs.samples += 1
        self.obs.peak_used_bytes = max(used, self.obs.peak_used_bytes or 0)
        self._foreign |= foreign

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)

    def watch(self, pid: int) -> None:
        """The run's root process: it and its descendants are the run's own processes."""
        self._root = pid

    def start(self) -> "Observer":
        self._open()
        if self._handles:
            self.sample()  # one before the run starts
            self._thread = threading.Thread(target=self._loop, name="nvml-observer", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> Observation:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.sample()  # and one after it ended
            self._close(self._nvml)
        self.obs.foreign_pids = sorted(self._foreign)
        if self.obs.grade == "audited" and (self.obs.failed_samples or not self.obs.samples):
            self.obs.grade = "failed"
            self.obs.reason = f"{self.obs.failed_samples} NVML sample(s) failed: {self.obs.first_error}"
        return self.obs

    def __enter__(self) -> "Observer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def process_tree(root_pid: int) -> set[int]:
    """`root_pid` and its descendants now (from /proc), the run's own processes."""
    import os

    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [root_pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out
