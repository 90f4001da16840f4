"""cgroup v1 and v2 handling on a fake cgroup tree (plain directories and files), so both
versions are exercised whatever this machine mounts: limits written, counters parsed, a
failed write is one line."""

import pytest

from residency.run import cgroup, harness


def fake_v2(tmp_path, subtree="memory"):
    root = tmp_path / "cg2"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text(subtree + "\n")
    return root


def fake_v1(tmp_path):
    root = tmp_path / "cg1"
    root.mkdir()
    (root / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    return root


def test_v2_limits_written_and_counters_parsed(tmp_path):
    loc = cgroup.locate(str(fake_v2(tmp_path)))
    assert loc.version == 2
    cg = cgroup.Cgroup(loc, 123 << 20, name="cell")
    assert (cg.path / "memory.max").read_text() == str(123 << 20)
    (cg.path / "memory.peak").write_text(f"{100 << 20}\n")
    (cg.path / "memory.events").write_text("low 0\nhigh 3\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n")
    c = cg.counters()
    assert (c.version, c.peak_bytes, c.limit_events, c.oom_events, c.oom_kills) == (2, 100 << 20, 7, 1, 1)
    assert c.pressure_events is None
    for f in cg.path.iterdir():
        f.unlink()
    cg.remove()
    assert not cg.path.exists()


def test_v2_swap_off_when_the_file_exists(tmp_path):
    root = fake_v2(tmp_path)
    (root / "cell").mkdir()
    (root / "cell" / "memory.swap.max").write_text("max\n")
    # The directory exists already: a second cgroup of that name is refused in one line.
    with pytest.raises(cgroup.CgroupUnavailable, match="^cannot create .*cell: File exists$"):
        cgroup.Cgroup(cgroup.Location(2, root), 1 << 20, name="cell")


def test_v1_limit_and_memsw_written_and_counters_parsed(tmp_path):
    loc = cgroup.locate(str(fake_v1(tmp_path)))
    assert loc.version == 1
    cg = cgroup.Cgroup(loc, 64 << 20, name="cell")
    assert (cg.path / "memory.limit_in_bytes").read_text() == str(64 << 20)
    (cg.path / "memory.max_usage_in_bytes").write_text(f"{60 << 20}\n")
    (cg.path / "memory.failcnt").write_text("5\n")
    (cg.path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    c = cg.counters()
    assert (c.version, c.peak_bytes, c.limit_events, c.oom_kills) == (1, 60 << 20, 5, 2)


def test_failed_limit_write_is_one_line(tmp_path):
    root = fake_v1(tmp_path)

    class Blocked(cgroup.Cgroup):
        def _configure(self):
            # a directory where the limit file should be: the write fails
            (self.path / "memory.limit_in_bytes").mkdir()
            super()._configure()

    with pytest.raises(cgroup.CgroupUnavailable) as info:
        Blocked(cgroup.Location(1, root), 1 << 20, name="cell")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("cannot write '1048576' to ") and "memory.limit_in_bytes" in msg


def test_harness_required_mode_reports_failed_write(tmp_path, monkeypatch):
    root = fake_v1(tmp_path)

    def broken(loc, limit_bytes, name=None):
        raise cgroup.CgroupUnavailable(f"cannot write '{limit_bytes}' to {root}/x/memory.limit_in_bytes: Permission denied")

    monkeypatch.setattr(harness, "Cgroup", broken)
    eng = tmp_path / "eng"
    eng.write_text("#!/bin/sh\nexit 0\n")
    eng.chmod(0o755)
    with pytest.raises(harness.HarnessError, match="^cgroup required but unavailable: cannot write '1024' to .*Permission denied$"):
        harness.run([str(eng)], tmp_path / "run", limit_bytes=1024, cgroup_mode="required", cgroup_parent=str(root))
    assert not (tmp_path / "run").exists()


def test_not_a_cgroup_directory(tmp_path):
    with pytest.raises(cgroup.CgroupUnavailable, match="is not a memory cgroup directory"):
        cgroup.locate(str(tmp_path))


# ---- grading: the limit read back and swap verified off --------------------------------------

@pytest.fixture
def meminfo(tmp_path, monkeypatch):
    """A fake /proc/meminfo: set(swap_kib) writes SwapTotal."""
    path = tmp_path / "meminfo"
    monkeypatch.setattr(cgroup, "MEMINFO", path)

    def set_swap(kib):
        path.write_text(f"MemTotal:       24000000 kB\nSwapTotal:      {kib} kB\nSwapFree:       {kib} kB\n")
    set_swap(0)
    return set_swap


def test_v1_hard_with_memsw_read_back(tmp_path, meminfo):
    meminfo(8 << 20)  # swap on the machine: the memsw limit is what bounds the cell
    root = fake_v1(tmp_path)
    (root / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")

    class WithMemsw(cgroup.Cgroup):
        def _configure(self):
            (self.path / "memory.memsw.limit_in_bytes").write_text("max\n")  # the kernel makes it in every child
            super()._configure()

    cg = WithMemsw(cgroup.Location(1, root), 64 << 20, name="cell")
    a = cg.authority_at_end()
    assert a.hard and a.swap_off_by == "memory.memsw.limit_in_bytes = the limit"
    assert (a.limit_read_back, a.swap_read_back, a.swap_total_bytes) == (64 << 20, str(64 << 20), 8 << 30)


def test_v1_without_memsw_is_hard_only_without_swap(tmp_path, meminfo):
    root = fake_v1(tmp_path)
    cg = cgroup.Cgroup(cgroup.Location(1, root), 64 << 20, name="noswap")
    assert cg.authority.hard and cg.authority.swap_off_by == "no swap on the machine (SwapTotal 0)"
    meminfo(1024)  # swap turned on while the run ran
    a = cg.authority_at_end()
    assert not a.hard and a.reasons == ["swap was enabled on the machine during the run (SwapTotal > 0 at its end)"]

    meminfo(4096)
    a = cgroup.Cgroup(cgroup.Location(1, root), 64 << 20, name="swap").authority
    assert not a.hard and a.swap_off_by is None
    assert a.reasons == ["swap not verified off: memory.memsw.limit_in_bytes absent, SwapTotal 4194304 bytes"]


def test_v2_swap_max_read_back(tmp_path, meminfo):
    meminfo(4096)
    root = fake_v2(tmp_path)

    class Swap(cgroup.Cgroup):
        kernel_says = "0"

        def _configure(self):
            (self.path / "memory.swap.max").write_text("max\n")
            super()._configure()
            (self.path / "memory.swap.max").write_text(self.kernel_says + "\n")  # what the kernel kept

    a = Swap(cgroup.Location(2, root), 96 << 20, name="off").authority
    assert a.hard and a.swap_off_by == "memory.swap.max = 0" and a.swap_read_back == "0"
    Swap.kernel_says = "max"
    a = Swap(cgroup.Location(2, root), 96 << 20, name="on").authority
    assert not a.hard
    assert a.reasons == ["swap not verified off: memory.swap.max reads back 'max', SwapTotal 4194304 bytes"]
    # no memory.swap.max at all (swap accounting off): hard only with no swap on the machine
    a = cgroup.Cgroup(cgroup.Location(2, root), 96 << 20, name="noacct").authority
    assert not a.hard and "memory.swap.max absent" in a.reasons[0]
    meminfo(0)
    assert cgroup.Cgroup(cgroup.Location(2, root), 96 << 20, name="noswap").authority.hard


def test_limit_is_read_back_page_rounded(tmp_path, meminfo):
    root = fake_v2(tmp_path)
    limit = (96 << 20) + 123

    class Kernel(cgroup.Cgroup):
        stores = None

        def _configure(self):
            super()._configure()
            (self.path / "memory.max").write_text(f"{self.stores(limit)}\n")

    Kernel.stores = staticmethod(lambda b: b - b % cgroup.PAGE)  # what a kernel keeps: whole pages
    assert Kernel(cgroup.Location(2, root), limit, name="paged").authority.hard
    Kernel.stores = staticmethod(lambda b: b // 2)
    a = Kernel(cgroup.Location(2, root), limit, name="halved").authority
    assert not a.hard and a.reasons == [f"memory.max reads back '{limit // 2}', not the limit {limit}"]


def test_harness_grades_soft_and_says_why(tmp_path, meminfo, monkeypatch):
    meminfo(4096)
    root = fake_v1(tmp_path)
    monkeypatch.setattr(cgroup.Cgroup, "remove", lambda self, timeout_s=10.0: None)
    eng = tmp_path / "eng"
    eng.write_text("#!/bin/sh\nexit 0\n")
    eng.chmod(0o755)
    rec = harness.run([str(eng)], tmp_path / "run", limit_bytes=64 << 20, cgroup_mode="auto", cgroup_parent=str(root))
    host = rec["host"]
    assert host["grade"] == "soft"
    assert host["reason"] == "swap not verified off: memory.memsw.limit_in_bytes absent, SwapTotal 4194304 bytes"
    assert host["authority"]["limit_read_back"] == 64 << 20 and host["swept_cgroups"] == []


# ---- the sweep of cgroups a killed harness left behind -----------------------------------------

def _dead_pid() -> int:
    return int(open("/proc/sys/kernel/pid_max").read()) + 1  # no process can have it


def _cell(root, name, procs=""):
    d = root / name
    d.mkdir()
    (d / "cgroup.procs").write_text(procs)
    return d


def test_sweep_removes_only_empty_cgroups_of_dead_harnesses(tmp_path, monkeypatch):
    import os
    import shutil

    monkeypatch.setattr(cgroup, "_remove_dir", shutil.rmtree)  # a fake tree's control files are real files
    root = fake_v1(tmp_path)
    dead, live = _dead_pid(), os.getpid()
    stale = _cell(root, f"residency-{dead}-0a1b2c3d")
    busy = _cell(root, f"residency-{dead}-11112222", procs="4242\n")       # a task still inside
    mine = _cell(root, f"residency-{live}-33334444")                        # its harness still runs
    old = _cell(root, "residency-0123456789ab")                             # old naming, an hour old
    young = _cell(root, "residency-ba9876543210")                           # old naming, just made
    other = _cell(root, "someone-else")
    hour_ago = young.stat().st_mtime - cgroup.LEGACY_MIN_AGE_S - 1
    os.utime(old, (hour_ago, hour_ago))
    assert cgroup.sweep_stale(root) == [old.name, stale.name]
    assert not stale.exists() and not old.exists()
    assert busy.exists() and mine.exists() and young.exists() and other.exists()
    assert cgroup.sweep_stale(root) == []


def test_harness_sweeps_before_it_makes_a_cgroup_and_logs_it(tmp_path, meminfo, monkeypatch):
    import shutil

    monkeypatch.setattr(cgroup, "_remove_dir", shutil.rmtree)
    monkeypatch.setattr(cgroup.Cgroup, "remove", lambda self, timeout_s=10.0: shutil.rmtree(self.path))
    root = fake_v1(tmp_path)
    stale = _cell(root, f"residency-{_dead_pid()}-deadbeef")
    eng = tmp_path / "eng"
    eng.write_text("#!/bin/sh\nexit 0\n")
    eng.chmod(0o755)
    rec = harness.run([str(eng)], tmp_path / "run", limit_bytes=64 << 20, cgroup_parent=str(root))
    assert rec["host"]["swept_cgroups"] == [stale.name] and not stale.exists()
    assert rec["host"]["grade"] == "hard"  # SwapTotal 0 here (the fake meminfo)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == []  # its own cell was removed too
