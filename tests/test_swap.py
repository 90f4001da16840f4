"""residency.run.swap: a reclaim cell's swap file is on only while the cell runs, whatever happens
in it, and one a killed harness left on is turned off and removed by the next run."""

import os
import subprocess

import pytest

from residency.run import swap


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _can_swap(tmp_path) -> str | None:
    if os.geteuid() != 0:
        return "swapon needs root"
    try:
        with swap.temporary_swap(tmp_path / "probe", 1 << 20):
            pass
    except swap.SwapUnavailable as exc:
        return str(exc)
    return None


def test_sweep_turns_off_only_files_of_dead_harnesses(tmp_path, monkeypatch):
    dead, live = _dead_pid(), os.getpid()
    stale = tmp_path / f"{swap.PREFIX}{dead}-abcd1234.img"
    mine = tmp_path / f"{swap.PREFIX}{live}-abcd1234.img"
    other = tmp_path / "someone-elses.img"
    leftover = tmp_path / f"{swap.PREFIX}{dead}-ffff0000.img"  # made, never turned on
    for f in (stale, mine, other, leftover):
        f.write_bytes(b"x")
    procs = tmp_path / "swaps"
    procs.write_text("Filename Type Size Used Priority\n"
                     + "".join(f"{f} file 1024 0 -2\n" for f in (stale, mine, other)))
    calls = []
    monkeypatch.setattr(swap, "_run", lambda *cmd: calls.append(cmd))
    swept = swap.sweep_stale(tmp_path, proc_swaps=procs)
    assert calls == [("swapoff", str(stale))]
    assert sorted(swept) == sorted([str(stale), str(leftover)])
    assert not stale.exists() and not leftover.exists() and mine.exists() and other.exists()


def test_a_swap_file_is_on_during_the_block_and_gone_after_it(tmp_path):
    why = _can_swap(tmp_path)
    if why:
        pytest.skip(f"[swap] no swap file can be made here: {why}")
    with swap.temporary_swap(tmp_path, 4 << 20) as sw:
        assert sw.path in swap.active_files() and sw.bytes == 4 << 20
    assert sw.path not in swap.active_files() and not os.path.exists(sw.path)
    with pytest.raises(RuntimeError, match="inside"):
        with swap.temporary_swap(tmp_path, 4 << 20) as sw:
            raise RuntimeError("inside")
    assert sw.path not in swap.active_files() and not os.path.exists(sw.path)


def test_a_swap_file_left_on_by_a_killed_harness_is_swept(tmp_path):
    why = _can_swap(tmp_path)
    if why:
        pytest.skip(f"[swap] no swap file can be made here: {why}")
    path = tmp_path / f"{swap.PREFIX}{_dead_pid()}-0badcafe.img"
    swap._fill(path, 2 << 20)
    swap._run("mkswap", str(path))
    swap._run("swapon", str(path))
    try:
        assert str(path) in swap.active_files()
        assert swap.sweep_stale(tmp_path) == [str(path)]
        assert str(path) not in swap.active_files() and not path.exists()
    finally:
        if str(path) in swap.active_files():
            swap._run("swapoff", str(path))


def test_swap_needs_root_and_a_sane_size(tmp_path, monkeypatch):
    with pytest.raises(swap.SwapUnavailable, match="at least 1 MiB"):
        with swap.temporary_swap(tmp_path, 4096):
            pass
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(swap.SwapUnavailable, match="^swapon needs root"):
        with swap.temporary_swap(tmp_path, 1 << 20):
            pass
