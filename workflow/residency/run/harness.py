"""The harness: run one `residctl` invocation inside its own memory cgroup and record it.

`residency run --out DIR --limit-bytes N -- residctl scan ... --out DIR` creates a fresh
child memory cgroup (hard limit, swap off), starts the command inside it, waits, reads the
kernel's counters, removes the cgroup (also when the run fails), writes DIR/harness.json
atomically and then DIR/manifest.json over every file of the directory, last (the engine's
own manifest, written before the harness added its files, is checked first and the result
recorded as `engine_manifest`). A run that the engine recorded as failed, or that
the kernel killed, is still a recorded run (exit 0): its failure is evidence. Bad input to
the engine (its exit status 2) and a cgroup that is required but cannot be made are errors
(exit 2, one line, nothing left in DIR).

Authority grades: `hard` (a limit was set in a cgroup, read back, and swap verified off for
the cell: cgroup.Authority), `soft` (a limit was set, but it did not read back or swap was
not verified off: pages could leave for swap beyond it; the reason is recorded),
`instrumented` (inside a cgroup, no limit: the peak is the kernel's high-water mark),
`unenforced` (no cgroup could be made).

Before it makes a cell's cgroup, the harness removes the ones a killed harness left behind
(cgroup.sweep_stale) and lists them in harness.json `host.swept_cgroups`.

GPU authority (harness.json `gpu`): the NVML observer (nvml.py) samples every board's used
memory and compute processes every `gpu_interval_s` while the run lasts, against the
declared allowance `gpu_declared_bytes`; grade `audited`, or `absent` (G = 0) where there is
no NVML or no GPU. `host.mem_total_bytes` is the Linux-visible host memory (MemTotal).
"""

from __future__ import annotations

import contextlib
import errno
import datetime as _dt
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from residency.core import atomic, manifest
from residency.run import host_lock, nvml, reclaim, swap
from residency.run.cgroup import PAGE, Cgroup, CgroupUnavailable, locate, sweep_stale
from residency.core.identity import sha256_file

SCHEMA_VERSION = 1
HARNESS_FILE = "harness.json"
STDERR_FILE = "residctl.stderr"


class HarnessError(RuntimeError):
    """A run that could not be made: the message is one line."""


def _resolve(cmd0: str) -> Path:
    found = shutil.which(cmd0)
    if not found:
        raise HarnessError(f"engine binary not found: {cmd0}")
    return Path(found).resolve()


def _drop_page_cache(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise HarnessError(f"cannot open {path} to drop its page cache: {exc.strerror}") from None
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _clean_dir(out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)


@dataclass
class Pressure:
    """A reclaim cell (P3): the cgroup under `high_bytes` of pressure with a swap file of
    `swap_bytes` on (in `swap_dir`) for the cell only."""

    high_bytes: int
    swap_bytes: int
    swap_dir: str


def _scheduler() -> dict | None:
    """The batch job a run ran in (SLURM sets these in a job), so a cluster run's record names it."""
    job = os.environ.get("SLURM_JOB_ID")
    return {"kind": "slurm", "job_id": job, "node": os.environ.get("SLURMD_NODENAME")} if job else None


def run(
    cmd: list[str],
    out: str | os.PathLike,
    limit_bytes: int | None,
    cgroup_mode: str = "auto",
    cgroup_parent: str | None = None,
    meta: dict | None = None,
    drop_cache: list[str] | None = None,
    pressure: Pressure | None = None,
    gpu_declared_bytes: int | None = None,
    gpu_interval_s: float = nvml.DEFAULT_INTERVAL_S,
) -> dict:
    """Run `cmd` under the host authority and write DIR/harness.json; return its content.

    `drop_cache` files have their clean page-cache pages dropped first, so a run starts
    cold and cannot use cache charged to an earlier run's cgroup beyond its own limit.
    `pressure` makes it a reclaim cell (module reclaim)."""
    if not cmd:
        raise HarnessError("no command given after --")
    out = Path(out)
    binary = _resolve(cmd[0])
    engine_sha = sha256_file(binary)
    _clean_dir(out)
    if pressure is not None and cgroup_mode != "required":
        why = _reclaim_unavailable(cgroup_mode, cgroup_parent)
        if why:
            return _unavailable_record(out, cmd, binary, engine_sha, meta, why)
    with host_lock.held() as lock_wait_s:
        swept_swap = _sweep_swap(pressure)
        with _swap_for(pressure, out) as swapfile:
            cg, reason, swept = _make_cgroup(cgroup_mode, cgroup_parent, limit_bytes, pressure, out)
            for path in drop_cache or []:
                _drop_page_cache(path)
            started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            gpu = nvml.Observer(gpu_declared_bytes, gpu_interval_s)
            proc, rusage, wall_s, counters, authority, rc = _execute(cmd, out, cg, pressure, gpu)

    code = proc.returncode
    stderr_text = (out / STDERR_FILE).read_text(errors="replace")
    status_word, term_signal = _outcome(code, counters, stderr_text, out)
    grade, reason = _grade(cg, limit_bytes if pressure is None else pressure.high_bytes, authority, reason)

    record = {
        "schema_version": SCHEMA_VERSION,
        "argv": cmd,
        "engine": {"path": str(binary), "sha256": engine_sha},
        "meta": meta or {},
        "status": status_word,
        "exit_code": code if code >= 0 else None,
        "term_signal": signal.Signals(term_signal).name if term_signal else None,
        "started_utc": started,
        "wall_s": wall_s,
        "rusage": {"maxrss_kib": rusage.ru_maxrss, "user_s": rusage.ru_utime, "sys_s": rusage.ru_stime,
                   "majflt": rusage.ru_majflt, "inblock": rusage.ru_inblock},
        "host": {
            "grade": grade,
            "reason": reason or None,
            "limit_bytes": limit_bytes,
            "mem_total_bytes": _mem_total(),
            "cgroup": asdict(counters) if counters else None,
            "authority": asdict(authority) if authority is not None and (limit_bytes is not None or pressure) else None,
            "swept_cgroups": swept,
            "swept_swap": swept_swap,
            "lock_wait_s": round(lock_wait_s, 3),  # waiting for another run cell on this host (host_lock)
            "reclaim": rc,
            "swap": asdict(swapfile) if swapfile else None,
        },
        "gpu": gpu.obs.as_dict(),
        "stderr_tail": stderr_text.splitlines()[-5:],
        "dropped_cache": list(drop_cache or []),
        "engine_manifest": _engine_manifest(out),
        "scheduler": _scheduler(),
    }
    atomic.write_json(out / HARNESS_FILE, record)
    manifest.write(out)
    return record


def _outcome(code: int, counters, stderr_text: str, out: Path) -> tuple[str, int | None]:
    """(status word, terminating signal) of the engine's exit. Its bad-input exit (2) is the
    harness's error too: one line, nothing left in DIR."""
    if code == 2:
        line = next((l for l in stderr_text.splitlines() if l.strip()), "residctl exited with status 2")
        shutil.rmtree(out, ignore_errors=True)
        raise HarnessError(line)
    term_signal = -code if code < 0 else None
    if code == 0:
        return "ok", None
    if term_signal is not None:
        oom = bool(counters and counters.oom_kills)
        return ("oom-killed" if oom else f"killed-{signal.Signals(term_signal).name}"), term_signal
    return "failed", None


def _reclaim_unavailable(cgroup_mode: str, cgroup_parent: str | None) -> str | None:
    """Why a reclaim cell cannot be made here (None: it can)."""
    if cgroup_mode == "off":
        return "a reclaim cell needs a cgroup (harness.cgroup is off)"
    if os.geteuid() != 0:
        return "a reclaim cell turns a swap file on: swapon needs root (CAP_SYS_ADMIN)"
    try:
        locate(cgroup_parent)
    except CgroupUnavailable as exc:
        return f"a reclaim cell needs a cgroup: {exc}"
    return None


def _unavailable_record(out: Path, cmd: list[str], binary: Path, engine_sha: str, meta: dict | None, why: str) -> dict:
    """A reclaim cell this machine cannot make: recorded as such (its claim says why), not run."""
    record = {"schema_version": SCHEMA_VERSION, "argv": cmd, "engine": {"path": str(binary), "sha256": engine_sha},
              "meta": meta or {}, "status": "unavailable", "exit_code": None, "term_signal": None,
              "started_utc": None, "wall_s": None, "rusage": None,
              "host": {"grade": "unenforced", "reason": why, "limit_bytes": None, "cgroup": None, "authority": None,
                       "swept_cgroups": [], "swept_swap": [], "reclaim": None, "swap": None},
              "stderr_tail": [], "dropped_cache": [], "engine_manifest": "absent"}
    atomic.write_json(out / HARNESS_FILE, record)
    manifest.write(out)
    return record


def _sweep_swap(pressure: Pressure | None) -> list[str]:
    """Swap files a killed harness left on (root only: nobody else could have made them)."""
    if os.geteuid() != 0:
        return []
    try:
        return swap.sweep_stale(pressure.swap_dir if pressure else None)
    except swap.SwapUnavailable as exc:
        raise HarnessError(f"a stale swap file cannot be removed: {exc}") from None


def _swap_for(pressure: Pressure | None, out: Path):
    return contextlib.nullcontext(None) if pressure is None else _checked_swap(pressure, out)


@contextlib.contextmanager
def _checked_swap(pressure: Pressure, out: Path):
    """The reclaim cell's swap file, on for the cell only (module swap)."""
    try:
        with swap.temporary_swap(pressure.swap_dir, pressure.swap_bytes) as sw:
            yield sw
    except swap.SwapUnavailable as exc:
        shutil.rmtree(out, ignore_errors=True)
        raise HarnessError(f"reclaim cell needs a swap file: {exc}") from None


def _make_cgroup(mode: str, parent: str | None, limit_bytes: int | None, pressure: Pressure | None,
                 out: Path) -> tuple[Cgroup | None, str, list[str]]:
    """(the cell's cgroup or None, why none, the stale cgroups swept first)."""
    if mode == "off":
        if pressure is not None:
            raise HarnessError("a reclaim cell needs a cgroup (harness.cgroup is off)")
        return None, "cgroup disabled by configuration (harness.cgroup: off)", []
    try:
        loc = locate(parent)
        swept = sweep_stale(loc.parent)
        cg = Cgroup(loc, limit_bytes) if pressure is None else Cgroup(loc, limit_bytes, high_bytes=pressure.high_bytes)
        return cg, "", swept
    except CgroupUnavailable as exc:
        if mode == "required" or pressure is not None:
            shutil.rmtree(out, ignore_errors=True)
            raise HarnessError(f"cgroup required but unavailable: {exc}") from None
        return None, str(exc), []


def _mem_total() -> int | None:
    from residency.core.machine import _mem_total as mem_total

    return mem_total()


def _execute(cmd: list[str], out: Path, cg: Cgroup | None, pressure: Pressure | None, gpu: nvml.Observer):
    """Run the command inside the cgroup, observed by the GPU observer; read its counters;
    always remove the cgroup."""
    sampler = reclaim.Sampler(cg.path, cg.version) if (cg is not None and pressure) else None
    t0 = time.monotonic()
    try:
        with open(out / STDERR_FILE, "wb") as err, (sampler or contextlib.nullcontext()), gpu:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=err,
                preexec_fn=(cg.enter if cg is not None else None),
            )
            gpu.watch(proc.pid)  # its process tree's compute processes are the run's own
            _, status, rusage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.monotonic() - t0
        counters = cg.counters() if cg is not None else None
        authority = cg.authority_at_end() if cg is not None else None
        rc = (reclaim.as_record(reclaim.read(cg.path, cg.version, pressure.high_bytes, PAGE, sampler.peaks))
              if sampler else None)
    finally:
        if cg is not None:
            cg.remove()
    return proc, rusage, wall_s, counters, authority, rc


def _grade(cg: Cgroup | None, limit_bytes: int | None, authority, reason: str) -> tuple[str, str]:
    """(grade, reason) of the host authority a run had."""
    if cg is None:
        return "unenforced", reason
    if limit_bytes is None:
        return "instrumented", reason
    if authority.hard:
        return "hard", reason
    return "soft", "; ".join(authority.reasons)


def _engine_manifest(out: Path) -> str:
    """"ok", "absent" (the engine did not finish its record) or "mismatch: <first file>":
    the engine's files must be as its manifest says when the harness adds its own."""
    try:
        found = manifest.problems(out, ignore=(STDERR_FILE,))
    except manifest.ManifestMissing:
        return "absent"
    except manifest.ManifestError as exc:
        return f"mismatch: {exc}"
    return f"mismatch: {found[0]}" if found else "ok"


def limit_from(budget_bytes: int | None, overhead_file: str | None, limit_bytes: int | None) -> tuple[int | None, dict]:
    """The host limit of a cell: r*T_repr + R, with the calibrated O and its reserve R = O +
    margin from the calibration record (overhead.py); both are recorded in the cell's meta."""
    if overhead_file is None:
        return limit_bytes, {}
    if budget_bytes is None:
        raise HarnessError("--overhead needs --budget-bytes")
    import json

    rec = json.loads(Path(overhead_file).read_text())
    if "reserve_bytes" not in rec:
        raise HarnessError(f"{overhead_file}: a calibration record without reserve_bytes (made by an older "
                           "residency overhead): remake it")
    o, r = int(rec["overhead_bytes"]), int(rec["reserve_bytes"])
    return budget_bytes + r, {"overhead_bytes": o, "reserve_bytes": r, "budget_bytes": budget_bytes}


def pressure_from(args, extra: dict) -> Pressure | None:
    """A reclaim cell's pressure: O + fraction * budget (O and the budget as for its limit)."""
    if args.reclaim_fraction is None:
        return None
    if not 0 < args.reclaim_fraction < 1 or "overhead_bytes" not in extra:
        raise HarnessError("--reclaim-fraction needs a value in (0, 1), --budget-bytes and --overhead")
    if not args.swap_bytes or not args.swap_dir:
        raise HarnessError("--reclaim-fraction needs --swap-bytes and --swap-dir")
    high = extra["overhead_bytes"] + int(args.reclaim_fraction * extra["budget_bytes"])
    extra.update(reclaim_high_bytes=high, reclaim_fraction=args.reclaim_fraction)
    return Pressure(high_bytes=high, swap_bytes=args.swap_bytes, swap_dir=args.swap_dir)


ENVIRONMENT_HINTS = {
    errno.ENOSPC: "the filesystem is full: free space there (or point results/ elsewhere) and rerun",
    errno.EDQUOT: "the disk quota is spent: free space there and rerun",
    errno.EROFS: "the filesystem is read-only: make the results directory writable and rerun",
    errno.EACCES: "permission denied: make the results directory writable by this user and rerun",
    errno.EPERM: "not permitted: make the results directory writable by this user and rerun",
    errno.ENOENT: "it vanished during the run (removed by something else): rerun the cell",
}


def environment_line(exc: OSError, out: Path) -> str:
    """One line for an OSError the machine caused: the path (the run directory `out` when
    the error names none, as a failed write does), what happened, what to do."""
    where = exc.filename or out
    hint = ENVIRONMENT_HINTS.get(exc.errno, "rerun the cell once it is fixed")
    return f"{where}: {exc.strerror or exc}; {hint}"


def _remove_partials(out: Path) -> None:
    """Temporary files of writes that did not finish (the engine's and ours): nothing final
    was written half (every write is atomic), and nothing half-written stays."""
    for p in [*out.glob("*.tmp"), *out.glob(".*.tmp")] if out.is_dir() else []:
        p.unlink(missing_ok=True)


def main_run(args) -> int:
    try:
        limit, extra = limit_from(args.budget_bytes, args.overhead, args.limit_bytes)
        pressure = pressure_from(args, extra)
        meta = dict(kv.split("=", 1) for kv in (args.meta or []))
        meta.update(extra)
        rec = run(args.cmd, args.out, limit, args.cgroup, args.cgroup_parent, meta=meta,
                  drop_cache=args.drop_cache, pressure=pressure, gpu_declared_bytes=args.gpu_declared_bytes,
                  gpu_interval_s=args.gpu_interval_s)
    except HarnessError as exc:
        print(f"residency run: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the machine, not the cell: a full or read-only disk, a vanished directory
        print(f"residency run: error: {environment_line(exc, Path(args.out))}", file=sys.stderr)
        _remove_partials(Path(args.out))
        return 2
    host = rec["host"]
    cg = host["cgroup"] or {}
    print(f"residency run: {rec['status']} in {rec['wall_s']:.2f} s, host grade {host['grade']}, "
          f"peak {cg.get('peak_bytes')} of limit {host['limit_bytes']}; GPU {rec['gpu']['grade']}", file=sys.stderr)
    return 0
