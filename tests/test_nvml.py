"""The NVML observer against a fake NVML module: whole-board peak, foreign compute
processes, failed samples; and without a GPU (here) grade `absent` with G = 0."""

import os
import subprocess
import sys
import types

import pytest

from residency.run import harness, nvml

GiB = 1 << 30


class NVMLError(Exception):
    pass


def fake_nvml(boards, pids=(), fail_after=None, init_error=None):
    """A stand-in for pynvml: `boards` is a list of (name, total, [used per sample ...])."""
    state = {"samples": 0}

    def used_info(h):
        name, total, used = boards[h]
        i = min(state["samples"] // len(boards), len(used) - 1)
        state["samples"] += 1
        if fail_after is not None and state["samples"] > fail_after:
            raise NVMLError("GPU is lost")
        return types.SimpleNamespace(total=total, used=used[i], free=total - used[i])

    def init():
        if init_error:
            raise NVMLError(init_error)

    return types.SimpleNamespace(
        nvmlInit=init, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: len(boards),
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: boards[h][0].encode(),
        nvmlDeviceGetMemoryInfo=used_info,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=p) for p in pids])


def observe(nv, declared=8 * GiB, own=frozenset({100}), samples=3):
    ob = nvml.Observer(declared, 0.01, own_pids=lambda: set(own), nvml=nv)
    ob._open()
    for _ in range(samples):
        ob.sample()
    ob._handles = []  # stop() then skips the thread join (none was started)
    return ob.stop().as_dict()


def test_two_boards_audited_with_whole_board_peak_and_margin():
    nv = fake_nvml([("H200", 141 * GiB, [1 * GiB, 5 * GiB, 2 * GiB]), ("H200", 141 * GiB, [0, GiB, 0])])
    d = observe(nv)
    assert d["grade"] == "audited" and d["reason"] is None
    assert d["g_phys_bytes"] == 282 * GiB and d["g_decl_bytes"] == 8 * GiB
    assert d["peak_used_bytes"] == 6 * GiB and d["margin_bytes"] == 2 * GiB  # peak of the per-sample sums
    assert d["samples"] == 3 and d["failed_samples"] == 0 and d["foreign_compute_processes"] == 0
    assert [b["name"] for b in d["boards"]] == ["H200", "H200"]


def test_a_foreign_compute_process_is_named_and_a_peak_above_the_allowance_has_negative_margin():
    d = observe(fake_nvml([("A100", 40 * GiB, [9 * GiB])], pids=[100, 4242]), declared=8 * GiB)
    assert d["foreign_pids"] == [4242] and d["foreign_compute_processes"] == 1
    assert d["margin_bytes"] == -GiB


def test_a_failed_sample_fails_the_grade():
    d = observe(fake_nvml([("A100", 40 * GiB, [GiB])], fail_after=2))
    assert d["grade"] == "failed" and d["failed_samples"] >= 1 and "GPU is lost" in d["reason"]


@pytest.mark.parametrize("nv, why", [
    (fake_nvml([], init_error="NVML Shared Library Not Found"), "NVML unavailable: NVML Shared Library Not Found"),
    (fake_nvml([]), "NVML found no GPU"),
])
def test_absent_is_g_zero_with_the_reason(nv, why):
    d = observe(nv, declared=4 * GiB, samples=0)
    assert d["grade"] == "absent" and d["reason"] == why
    assert d["g_phys_bytes"] == 0 and d["g_decl_bytes"] == 0 and d["peak_used_bytes"] is None


def test_no_binding_is_absent(monkeypatch):
    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(nvml, "_load_pynvml", missing)
    d = nvml.Observer(GiB).start().stop().as_dict()
    assert d["grade"] == "absent" and "no NVML binding" in d["reason"] and d["g_phys_bytes"] == 0


def _has_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount() > 0
    except Exception:
        return False


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU: the real observer audits it")
def test_real_pynvml_without_a_gpu_is_absent():
    d = nvml.Observer(GiB).start().stop().as_dict()
    assert d["grade"] == "absent" and d["g_phys_bytes"] == 0 and d["reason"]


def test_the_thread_samples_while_the_run_lasts():
    nv = fake_nvml([("H200", 141 * GiB, [GiB])])
    with nvml.Observer(GiB, 0.005, own_pids=lambda: set(), nvml=nv) as ob:
        import time

        time.sleep(0.05)
    assert ob.obs.grade == "audited" and ob.obs.samples >= 3


def test_process_tree_holds_the_root_and_its_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        tree = nvml.process_tree(os.getpid())
        assert os.getpid() in tree and child.pid in tree
    finally:
        child.kill()
        child.wait()


def test_harness_records_the_gpu_observation(tmp_path):
    rec = harness.run(["true"], tmp_path / "run", limit_bytes=None, cgroup_mode="off", gpu_declared_bytes=GiB)
    assert rec["gpu"]["grade"] in ("absent", "audited") and "g_phys_bytes" in rec["gpu"]
    if not _has_gpu():
        assert rec["gpu"]["grade"] == "absent" and rec["gpu"]["g_decl_bytes"] == 0
