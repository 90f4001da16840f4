"""A stale Snakemake lock is named as stale and cleared; a held one is left alone.

A run killed with SIGKILL leaves .snakemake/locks/ behind; the next run's own message
("Another Snakemake instance is running") is not so. `residency unlock` (and `make
figures` through it) removes a lock only when no live Snakemake works in the directory."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import pipeline_env, snakemake, tiny_workdir
from residency.core import locks


def unlock(work, *flags):
    return subprocess.run([sys.executable, "-m", "residency.cli", "unlock", "--dir", str(work), *flags],
                          capture_output=True, text=True)


def a_lock(work):
    d = work / ".snakemake" / "locks"
    d.mkdir(parents=True)
    (d / "0.input.lock").write_text("x\n")
    return d


def test_no_lock_is_no_lock(tmp_path):
    assert locks.state(tmp_path) == ("none", [])
    p = unlock(tmp_path, "--if-stale")
    assert p.returncode == 0 and p.stderr == ""


def test_a_lock_nobody_holds_is_stale_and_removed_in_one_line(tmp_path):
    d = a_lock(tmp_path)
    assert locks.state(tmp_path) == ("stale", [])
    assert locks.stale_note(tmp_path).endswith("clear it with `residency unlock`")
    p = unlock(tmp_path, "--if-stale")
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == [f"residency unlock: {tmp_path}: removed a stale lock (no Snakemake process runs there)"]
    assert list(d.iterdir()) == []


def test_a_lock_a_live_snakemake_holds_is_left_alone(tmp_path):
    d = a_lock(tmp_path)
    live = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 60"], cwd=tmp_path)
    try:
        time.sleep(0.3)  # the exec has happened
        assert locks.state(tmp_path) == ("held", [live.pid])
        assert locks.stale_note(tmp_path) is None
        p = unlock(tmp_path)
        assert p.returncode == 1
        assert p.stderr.splitlines() == [f"residency unlock: {tmp_path} is locked by a running Snakemake (pid {live.pid}): "
                                         "left alone"]
        assert (d / "0.input.lock").exists()
    finally:
        live.kill()
        live.wait()


@pytest.mark.integration
def test_after_kill_9_the_next_run_names_the_stale_lock_and_unlock_clears_it(tmp_path):
    """A real Snakemake run killed with SIGKILL while it holds the lock."""
    work = tiny_workdir(tmp_path)
    (work / "Slow").write_text("rule slow:\n    output: 'slow.txt'\n    shell: 'sleep 60; touch {output}'\n")
    run = subprocess.Popen([sys.executable, "-m", "snakemake", "-s", "Slow", "--cores", "1"], cwd=work,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(200):
        if locks.lock_files(work):
            break
        time.sleep(0.1)
    assert locks.state(work) == ("held", [run.pid])
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert locks.state(work)[0] == "stale"
    p = snakemake(work, "-n", "--cores", "1", "figures", env=pipeline_env())
    notes = [ln for ln in p.stderr.splitlines() if ln.startswith("note:") and "stale lock" in ln]
    assert len(notes) == 1 and notes[0].endswith("clear it with `residency unlock`"), p.stderr[-2000:]
    assert unlock(work).returncode == 0 and locks.state(work) == ("none", [])
