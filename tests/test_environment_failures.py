"""Every environment failure of a run cell ends in one line: a full disk (ENOSPC), a
read-only filesystem (EROFS), a directory this user may not write (EACCES), a run directory
that vanished, a cgroup that cannot be made.
Exit 2, the path and what to do named, no temporary file left, nothing final half-written.
The run directory's filesystem is a small tmpfs mounted for the test (root)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                reason="[root] mounting a small tmpfs needs root")


@pytest.fixture
def small_fs(tmp_path):
    """A 256 KiB tmpfs: room for a run directory, not for what the fake engine writes."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def engine(tmp_path, body):
    p = tmp_path / "fake-residctl"
    p.write_text(f"#!/bin/sh\n{body}\n")
    p.chmod(0o755)
    return str(p)


def run_cell(out, *cmd, extra=()):
    return subprocess.run([sys.executable, "-m", "residency.cli", "run", "--out", str(out), "--cgroup", "off",
                           *extra, "--", *cmd], capture_output=True, text=True, cwd=ROOT)


def one_line(p, *needles):
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("residency run: error: "), lines
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def leftovers(root):
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*") if p.name.endswith(".tmp"))


def test_a_full_disk_is_one_line_and_leaves_no_temporary_file(tmp_path, small_fs):
    out = small_fs / "run"
    eng = engine(tmp_path, f'head -c 300000 /dev/zero > "{out}/objects.json.tmp"; exit 1')  # an engine cut short
    line = one_line(run_cell(out, eng), "No space left on device", "the filesystem is full")
    assert str(out) in line
    assert leftovers(small_fs) == [] and not (out / "harness.json").exists()


def test_the_engine_on_a_full_disk_leaves_no_temporary_file(tmp_path, small_fs):
    from conftest import engine_build_dir

    residctl = Path(engine_build_dir(tmp_path)) / "residctl"
    if not residctl.exists():
        pytest.skip(f"[engine] no engine build at {residctl}")
    p = subprocess.run([str(residctl), "mkregion", "--out", str(small_fs / "r.bin"), "--size", str(1 << 20),
                        "--seed", "1"], capture_output=True, text=True)
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "ENOSPC" in p.stderr and leftovers(small_fs) == [] and not (small_fs / "r.bin").exists()
    out = small_fs / "cell"  # through the harness: a failed cell whose record names the engine's line
    p = run_cell(out, str(residctl), "mkregion", "--out", str(out / "r.bin"), "--size", str(1 << 20), "--seed", "1")
    assert p.returncode == 0 and "residency run: failed" in p.stderr, p.stderr
    rec = json.loads((out / "harness.json").read_text())
    assert rec["status"] == "failed" and any("ENOSPC" in ln for ln in rec["stderr_tail"]), rec["stderr_tail"]
    assert leftovers(small_fs) == []


def test_a_read_only_filesystem_is_one_line(tmp_path, small_fs):
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    one_line(run_cell(small_fs / "run", engine(tmp_path, "exit 0")), "Read-only file system", "read-only")


def test_a_directory_this_user_may_not_write_is_one_line(tmp_path):
    """EACCES as a user meets it: root without the capabilities that bypass permission bits
    (setpriv drops them from the bounding set) under a directory of mode 0555."""
    if shutil.which("setpriv") is None:
        pytest.skip("[root] setpriv (util-linux) drops root's permission-bypassing capabilities")
    parent = tmp_path / "read-only-for-users"
    parent.mkdir(mode=0o555)
    out = parent / "run"
    p = subprocess.run(["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--",
                        sys.executable, "-m", "residency.cli", "run", "--out", str(out), "--cgroup", "off", "--",
                        engine(tmp_path, "exit 0")], capture_output=True, text=True, cwd=ROOT)
    line = one_line(p, "Permission denied", "make the results directory writable")
    assert str(out) in line and not out.exists()


def test_a_run_directory_that_vanished_is_one_line(tmp_path):
    out = tmp_path / "run"
    line = one_line(run_cell(out, engine(tmp_path, f'rm -rf "{out}"; exit 0')), "vanished during the run")
    assert str(out) in line


def test_a_cgroup_that_cannot_be_made_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "residency.cli", "run", "--out", str(tmp_path / "run"),
                        "--cgroup", "required", "--cgroup-parent", str(tmp_path / "no-such-cgroup"),
                        "--limit-bytes", str(1 << 30), "--", engine(tmp_path, "exit 0")],
                       capture_output=True, text=True, cwd=ROOT)
    one_line(p, "cgroup required but unavailable")
