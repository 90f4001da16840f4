"""`make test` runs its steps in lanes side by side (the Makefile's `test` target): the lanes
run every step the targets run alone, each step after what it needs, and a step's held output
(workflow/scripts/lane.sh) comes out whole under a line with its status."""

import re
import shutil
import subprocess

import pytest

from conftest import ROOT

LANE = ROOT / "workflow" / "scripts" / "lane.sh"
TARGETS = ["test-engine", "test-fuzz", "test-python"]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(*args: str) -> list[str]:
    """The recipe lines `make -n` would run, in its order (serial: -n runs nothing)."""
    p = subprocess.run(["make", "--no-print-directory", "-n", *args], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return [ln for ln in p.stdout.splitlines() if ln.strip()]


def test_the_lanes_run_every_step_the_targets_run_alone():
    alone = dry_run(*TARGETS)
    lanes = dry_run("TEST_LANES=1", "test-lanes")
    assert sorted(lanes) == sorted(alone)


def order(*args: str) -> dict[str, set[str]]:
    """Make's rules: each target's prerequisites, normal and order-only, from `make -p`."""
    p = subprocess.run(["make", "--no-print-directory", "-p", "-n", *args], cwd=ROOT, capture_output=True, text=True)
    rules: dict[str, set[str]] = {}
    for ln in p.stdout.splitlines():
        if m := re.fullmatch(r"([a-z][a-z-]*): ?([^=]*)", ln):
            rules.setdefault(m.group(1), set()).update(m.group(2).replace("|", " ").split())
    return rules


def before(rules: dict[str, set[str]], target: str) -> set[str]:
    """Every target make finishes before it starts `target`'s recipe."""
    seen, todo = set(), list(rules.get(target, ()))
    while todo:
        t = todo.pop()
        if t not in seen:
            seen.add(t)
            todo.extend(rules.get(t, ()))
    return seen


# (target, what it waits for in the lanes): one build at a time, one ctest at a time, one
# apt-get at a time, pytest after everything.
LANE_ORDER = [("engine-asan-build", "engine-test-build"), ("engine-tsan-build", "engine-asan-build"),
              ("fuzz-build", "engine-tsan-build"), ("test-engine-asan", "test-engine-release"),
              ("test-engine-tsan", "test-engine-asan"), ("test-fuzz", "test-engine-tsan"), ("clang", "browser"),
              ("test-python", "test-engine-tsan"), ("test-python", "test-fuzz"), ("test-python", "llm-models")]


def test_in_the_lanes_each_step_waits_for_the_one_before_it_and_alone_none_does():
    lanes, alone = order("TEST_LANES=1", "test-lanes"), order(*TARGETS)
    for target, first in LANE_ORDER:
        assert first in before(lanes, target), (target, first)
    # alone, the sanitizer builds, the fuzz build and clang wait for no other build or install
    for target, first in LANE_ORDER[:3] + [("clang", "browser")]:
        assert first not in before(alone, target), (target, first)


def lane(tmp_path, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LANE), "a step", str(tmp_path / "logs" / "step.log"), *cmd], capture_output=True, text=True)


def test_a_step_that_passes_prints_its_output_whole_under_its_status(tmp_path):
    p = lane(tmp_path, "sh", "-c", "echo one; echo two >&2; echo three")
    assert p.returncode == 0
    out = p.stdout.splitlines()
    assert re.fullmatch(rf"=== a step: passed in \d+ s; its output \({tmp_path}/logs/step\.log\):", out[0])
    assert out[1:] == ["one", "two", "three", "=== end of a step"]
    assert (tmp_path / "logs" / "step.log").read_text() == "one\ntwo\nthree\n"


def test_a_step_that_fails_says_so_and_exits_with_its_status(tmp_path):
    p = lane(tmp_path, "sh", "-c", "echo what broke; exit 3")
    assert p.returncode == 3
    assert p.stdout.splitlines()[0].startswith("=== a step: FAILED (exit 3) in ")
    assert "what broke" in p.stdout


def test_a_lane_without_a_command_is_a_usage_error(tmp_path):
    p = subprocess.run([str(LANE), "a step", str(tmp_path / "step.log")], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("usage: ")
