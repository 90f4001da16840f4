"""cgroup v1 and v2 handling on a fake cgroup tree (plain directories and files), so both
versions are exercised whatever this machine mounts: limits written, counters parsed, a
failed write is one line."""

import pytest

from residency import cgroup, harness


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
