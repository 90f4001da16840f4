"""The harness and its cgroups: limits hold, the kernel's counters are read, cgroups are
removed afterwards (also when the run fails), and bad input is a one-line error."""

import json
import os
import sys
from pathlib import Path

import pytest

from residency.run import cgroup, harness

LOC, WHY = cgroup.probe_writable()
needs_cgroup = pytest.mark.skipif(LOC is None, reason=f"[cgroup] no writable memory cgroup here: {WHY}")


def fake_engine(tmp_path, body: str) -> str:
    p = tmp_path / "fake-residctl"
    p.write_text(f"#!{sys.executable}\nimport sys, os, json\n{body}\n")
    p.chmod(0o755)
    return str(p)


def children(loc):
    """This process's cell cgroups (residency-<pid>-...): another test worker's campaign makes
    and removes its own beside them."""
    mine = f"residency-{os.getpid()}-"
    return sorted(p.name for p in loc.parent.iterdir() if p.is_dir() and p.name.startswith(mine))


@needs_cgroup
def test_limit_enforced_and_counters_read(tmp_path):
    before = children(LOC)
    eng = fake_engine(tmp_path, "x = bytearray(256 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1")
    rec = harness.run([eng], tmp_path / "run", limit_bytes=64 << 20)
    cg = rec["host"]["cgroup"]
    assert rec["host"]["grade"] == "hard"
    assert rec["status"] == "oom-killed"
    assert cg["oom_kills"] >= 1
    assert cg["peak_bytes"] <= 64 << 20
    assert children(LOC) == before, "the run's cgroup was not removed"
    assert json.loads((tmp_path / "run" / "harness.json").read_text())["status"] == "oom-killed"


@needs_cgroup
def test_within_limit_ok_and_peak_measured(tmp_path):
    eng = fake_engine(tmp_path, "x = bytearray(32 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1")
    rec = harness.run([eng], tmp_path / "run", limit_bytes=256 << 20, meta={"arm": "pager-lru"})
    cg = rec["host"]["cgroup"]
    assert rec["status"] == "ok" and rec["exit_code"] == 0
    assert 32 << 20 <= cg["peak_bytes"] <= 256 << 20
    assert cg["oom_kills"] == 0
    assert rec["meta"] == {"arm": "pager-lru"}
    assert len(rec["engine"]["sha256"]) == 64


@needs_cgroup
def test_engine_failure_is_recorded_and_cgroup_removed(tmp_path):
    before = children(LOC)
    eng = fake_engine(tmp_path, "print('residctl: verify error at offset 4096', file=sys.stderr); sys.exit(1)")
    rec = harness.run([eng], tmp_path / "run", limit_bytes=64 << 20)
    assert rec["status"] == "failed" and rec["exit_code"] == 1
    assert "verify error" in rec["stderr_tail"][-1]
    assert children(LOC) == before


def test_bad_input_is_one_line_and_leaves_nothing(tmp_path):
    eng = fake_engine(tmp_path, "print('residctl: error: region file not found: /nope', file=sys.stderr); sys.exit(2)")
    with pytest.raises(harness.HarnessError, match="^residctl: error: region file not found: /nope$"):
        harness.run([eng], tmp_path / "run", limit_bytes=None, cgroup_mode="off")
    assert not (tmp_path / "run").exists()


def test_missing_engine_binary(tmp_path):
    with pytest.raises(harness.HarnessError, match="engine binary not found"):
        harness.run([str(tmp_path / "nope")], tmp_path / "run", limit_bytes=None)


def test_unenforced_when_cgroups_are_off(tmp_path):
    eng = fake_engine(tmp_path, "pass")
    rec = harness.run([eng], tmp_path / "run", limit_bytes=1 << 30, cgroup_mode="off")
    assert rec["host"]["grade"] == "unenforced"
    assert "disabled" in rec["host"]["reason"]


def test_required_cgroup_that_cannot_be_made_stops(tmp_path, monkeypatch):
    def nope(_parent=None):
        raise cgroup.CgroupUnavailable("no memory cgroup found (test)")
    monkeypatch.setattr(harness, "locate", nope)
    eng = fake_engine(tmp_path, "pass")
    with pytest.raises(harness.HarnessError, match="cgroup required but unavailable: no memory cgroup found"):
        harness.run([eng], tmp_path / "run", limit_bytes=1 << 30, cgroup_mode="required")
    rec = harness.run([eng], tmp_path / "run2", limit_bytes=1 << 30, cgroup_mode="auto")
    assert rec["host"]["grade"] == "unenforced" and "test" in rec["host"]["reason"]


def test_cli_error_exit_status(tmp_path):
    import subprocess
    eng = fake_engine(tmp_path, "print('residctl: error: bad flag --x', file=sys.stderr); sys.exit(2)")
    p = subprocess.run([sys.executable, "-m", "residency.cli", "run", "--out", str(tmp_path / "r"),
                        "--cgroup", "off", "--", eng], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parent.parent)
    assert p.returncode == 2
    assert p.stderr.strip() == "residency run: error: residctl: error: bad flag --x"


@needs_cgroup
def test_a_killed_harness_leaves_a_cgroup_the_next_run_sweeps(tmp_path):
    """kill -9 of a harness mid-cell: its cgroup stays (nothing can remove it then); once its
    last task is gone, the next harness removes it and says so in harness.json."""
    import signal
    import subprocess
    import time

    sleeper = fake_engine(tmp_path, "import time\ntime.sleep(120)")
    p = subprocess.Popen([sys.executable, "-m", "residency.cli", "run", "--out", str(tmp_path / "r1"),
                          "--limit-bytes", str(64 << 20), "--", sleeper],
                         cwd=Path(__file__).resolve().parent.parent, stderr=subprocess.DEVNULL)
    left, tasks, deadline = None, [], time.monotonic() + 30
    while time.monotonic() < deadline and not tasks:
        time.sleep(0.1)
        left = next((d for d in LOC.parent.glob(f"residency-{p.pid}-*")), None)
        tasks = (left / "cgroup.procs").read_text().split() if left else []
    assert tasks, "the harness never started its engine in a cgroup"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    for pid in tasks:
        os.kill(int(pid), signal.SIGKILL)
    while (left / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left.exists()
    rec = harness.run([fake_engine(tmp_path, "pass")], tmp_path / "r2", limit_bytes=64 << 20)
    assert left.name in rec["host"]["swept_cgroups"] and not left.exists()


HOLDER = """import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
open(sys.argv[3], "w").write(repr(time.time()))  # before the lock goes with the process
"""


def hold_host_lock(tmp_path, seconds: float):
    """Another process holding the host's run-cell lock (a test's own file) for `seconds`."""
    import subprocess

    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "host.lock"), str(seconds),
                          str(tmp_path / "released")], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_cell_waits_for_another_cell_on_the_host(tmp_path, monkeypatch, capfd):
    """Run cells of two processes (two campaigns, two test workers) never overlap: the engine
    starts after the other holder let go, and the wait is recorded and said."""
    monkeypatch.setenv("RESIDENCY_HOST_LOCK", str(tmp_path / "host.lock"))
    holder = hold_host_lock(tmp_path, 1.0)
    eng = fake_engine(tmp_path, f"import time\nopen({str(tmp_path / 'started')!r}, 'w').write(repr(time.time()))")
    rec = harness.run([eng], tmp_path / "run", limit_bytes=None)
    holder.wait()
    assert rec["status"] == "ok"
    assert float((tmp_path / "started").read_text()) >= float((tmp_path / "released").read_text())
    assert rec["host"]["lock_wait_s"] > 0
    assert "waiting for another run cell on this host" in capfd.readouterr().err


def test_a_killed_holder_of_the_host_lock_blocks_nobody(tmp_path, monkeypatch):
    import signal

    monkeypatch.setenv("RESIDENCY_HOST_LOCK", str(tmp_path / "host.lock"))
    holder = hold_host_lock(tmp_path, 600)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    rec = harness.run([fake_engine(tmp_path, "pass")], tmp_path / "run", limit_bytes=None)
    assert rec["status"] == "ok" and not (tmp_path / "released").exists()
