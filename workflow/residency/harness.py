"""The harness: run one `residctl` invocation inside its own memory cgroup and record it.

`residency run --out DIR --limit-bytes N -- residctl scan ... --out DIR` creates a fresh
child memory cgroup (hard limit, swap off), starts the command inside it, waits, reads the
kernel's counters, removes the cgroup (also when the run fails), and writes
DIR/harness.json last and atomically. A run that the engine recorded as failed, or that
the kernel killed, is still a recorded run (exit 0): its failure is evidence. Bad input to
the engine (its exit status 2) and a cgroup that is required but cannot be made are errors
(exit 2, one line, nothing left in DIR).

Authority grades: `hard` (a limit was set in a cgroup), `instrumented` (inside a cgroup,
no limit: the peak is the kernel's high-water mark), `unenforced` (no cgroup could be made).
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from . import atomic
from .cgroup import Cgroup, CgroupUnavailable, locate
from .identity import sha256_file

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
) -> dict:
    """Run `cmd` under the host authority and write DIR/harness.json; return its content.

    `drop_cache` files have their clean page-cache pages dropped first, so a run starts
    cold and cannot use cache charged to an earlier run's cgroup beyond its own limit."""
    if not cmd:
        raise HarnessError("no command given after --")
    out = Path(out)
    binary = _resolve(cmd[0])
    engine_sha = sha256_file(binary)
    _clean_dir(out)

    cg = None
    reason = ""
    if cgroup_mode != "off":
        try:
            cg = Cgroup(locate(cgroup_parent), limit_bytes)
        except CgroupUnavailable as exc:
            reason = str(exc)
            if cgroup_mode == "required":
                shutil.rmtree(out, ignore_errors=True)
                raise HarnessError(f"cgroup required but unavailable: {reason}") from None
    else:
        reason = "cgroup disabled by configuration (harness.cgroup: off)"

    for path in drop_cache or []:
        _drop_page_cache(path)

    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    try:
        with open(out / STDERR_FILE, "wb") as err:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=err,
                preexec_fn=(cg.enter if cg is not None else None),
            )
            _, status, rusage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.monotonic() - t0
        counters = cg.counters() if cg is not None else None
    finally:
        if cg is not None:
            cg.remove()

    code = proc.returncode
    stderr_text = (out / STDERR_FILE).read_text(errors="replace")
    if code == 2:
        line = next((l for l in stderr_text.splitlines() if l.strip()), "residctl exited with status 2")
        shutil.rmtree(out, ignore_errors=True)
        raise HarnessError(line)

    term_signal = -code if code < 0 else None
    oom = bool(counters and counters.oom_kills)
    if code == 0:
        status_word = "ok"
    elif term_signal is not None:
        status_word = "oom-killed" if oom else f"killed-{signal.Signals(term_signal).name}"
    else:
        status_word = "failed"

    if cg is None:
        grade = "unenforced"
    elif limit_bytes is None:
        grade = "instrumented"
    else:
        grade = "hard"

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
            "cgroup": asdict(counters) if counters else None,
        },
        "stderr_tail": stderr_text.splitlines()[-5:],
        "dropped_cache": list(drop_cache or []),
        "scheduler": _scheduler(),
    }
    atomic.write_json(out / HARNESS_FILE, record)
    return record


def limit_from(budget_bytes: int | None, overhead_file: str | None, limit_bytes: int | None) -> tuple[int | None, dict]:
    """The host limit of a cell: r*T_repr + O, with O from the calibration record."""
    if overhead_file is None:
        return limit_bytes, {}
    if budget_bytes is None:
        raise HarnessError("--overhead needs --budget-bytes")
    import json

    o = int(json.loads(Path(overhead_file).read_text())["overhead_bytes"])
    return budget_bytes + o, {"overhead_bytes": o, "budget_bytes": budget_bytes}


def main_run(args) -> int:
    try:
        limit, extra = limit_from(args.budget_bytes, args.overhead, args.limit_bytes)
        meta = dict(kv.split("=", 1) for kv in (args.meta or []))
        meta.update(extra)
        rec = run(args.cmd, args.out, limit, args.cgroup, args.cgroup_parent, meta=meta,
                  drop_cache=args.drop_cache)
    except HarnessError as exc:
        print(f"residency run: error: {exc}", file=sys.stderr)
        return 2
    host = rec["host"]
    cg = host["cgroup"] or {}
    print(f"residency run: {rec['status']} in {rec['wall_s']:.2f} s, host grade {host['grade']}, "
          f"peak {cg.get('peak_bytes')} of limit {host['limit_bytes']}", file=sys.stderr)
    return 0
