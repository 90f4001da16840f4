import os
import subprocess
import sys
from pathlib import Path

import hypothesis
import pytest
import yaml

import campaign_snapshot
import checkout_lock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "workflow"))
os.environ.setdefault("MPLBACKEND", "Agg")

from require_features import pytest_configure, pytest_runtest_makereport  # noqa: E402,F401  (hooks)


def tiny_config(build_dir: str) -> dict:
    """The embedded default, shrunk: same keys (so it stays in step with config.yaml)."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["engine"]["build_dir"] = build_dir
    cfg["harness"]["overhead_reps"] = 3  # the least that shows a spread (the schema says so)
    ps = cfg["pager_synthetic"]
    ps.update(region_bytes=2 << 20, seed=7, chunk_bytes=64 << 10, watchdog_s=30, eager_reconcile=True)
    ps["main"].update(ratios=[0.5, 0.75], reps=2)
    ps["stress"].update(threads=[2], compute_us=[0, 50], reps=2)
    pm = cfg["pager_model"]
    pm.update(models=["synthetic-dense"], tokens=4, ctx=64, chunk_bytes=1 << 20, huge_chunks="off", ratios=[0.5, 0.75], reps=2,
              baseline_reps=2, roofline_reps=2, eager_reconcile=True)
    # The watchdog stays the default config's (300 s): arm A at its limit thrashes the page cache,
    # and on a loaded machine one step took over 60 s (bench/loaded_campaigns.py, 2026-12-04).
    # F's eight 1 MiB windows come out of the same budget as D's one: 0.5 of this small model
    # would leave F fewer chunks than two compute threads need, so the tiny study runs at 0.75.
    cfg["matched_source"].update(ratio=0.75, pairs=["D-F", "F-D"])
    cfg["reclaim"].update(reps=1, swap_bytes=16 << 20, watchdog_s=60)
    # A few fault cells on each adapter (the tiny study's dense model as the second).
    cfg["faults"].update(adapters=["synthetic-moe", "synthetic-dense"], c3_second_adapter=["none", "held-consumer"],
                         cells=["none", "short-read", "stale-completion", "held-consumer", "reset-outstanding"])
    # Two tasks at four tokens: the synthetic model tokenizes bytes, so the prompts need the 512 context.
    cfg["tasks"].update(n=2, tokens=4, ctx=512)
    # Two pairs (the alternation) on the tiny dense model: 8 layers of about 50 chunks; 16 each fit 12 MB.
    cfg["cache_transfer"].update(model="synthetic-dense", prompts=["Hello", "Goodbye"], tokens=4, ctx=64, k=16,
                                 budget_bytes=12_000_000, watchdog_s=60)
    # Speculative decoding on the same tiny model and budget, six outputs.
    cfg["speculative"].update(model="synthetic-dense", prompt="Hello", tokens=6, ctx=64, budget_bytes=12_000_000,
                              watchdog_s=60)
    # C8's pair on a smaller sparse MoE (two layers, about 28 MB), four outputs.
    cfg["models"]["synthetic"]["sparse-moe"]["n_layer"] = 2
    cfg["bounded_source"].update(tokens=4)
    cfg["llama"]["build_dir"] = str(ROOT / ".build" / "llama.cpp")  # the cached pinned build
    return cfg


def engine_build_dir(work: Path) -> str:
    """Reuse the build `make test` made (same sources), else let the pipeline build one."""
    shared = ROOT / ".build" / "engine-test"
    if (shared / "residctl").exists():
        return str(shared)
    return str(work / ".build" / "engine")


def tiny_workdir(work: Path) -> Path:
    """A working directory for the tiny pipeline: its config and a link to the engine."""
    (work / "engine").symlink_to(ROOT / "engine")
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(tiny_config(engine_build_dir(work))))
    return work


def pipeline_env() -> dict:
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def snakemake(work: Path, *args: str, env: dict | None = None, timeout: float = 1500) -> subprocess.CompletedProcess:
    """Snakemake on the repository's Snakefile in `work`."""
    cmd = [sys.executable, "-m", "snakemake", *args, "-s", str(ROOT / "Snakefile"), "-d", str(work)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env or pipeline_env(), timeout=timeout)


# Hypothesis's per-example deadline is a timed test: on a shared two-core machine running two
# test workers an example's first call (a lazy scipy import) took 1.3 s against its 200 ms.
hypothesis.settings.register_profile("residency", deadline=None)
hypothesis.settings.load_profile("residency")

# `make test` runs pytest on two workers (pytest-xdist). Each test file is one unit of work, so
# a module's fixtures are made once, and the files whose tests use the tiny campaign are one
# unit, so the session's campaign runs once. Units go out longest first: the campaign, then
# the two other Snakemake campaigns (the durations `make test` prints show which are longest).
CAMPAIGN_FILES = ("tests/test_cluster.py", "tests/test_golden_tables.py", "tests/test_integration.py",
                  "tests/test_readme_commands.py", "tests/test_report.py")
LONGEST_FIRST = ("campaign", "tests/test_hostile_paths.py", "tests/test_sweep.py")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: "campaign" or its file."""
    file = nodeid.split("::")[0]
    return "campaign" if file in CAMPAIGN_FILES else file


def pytest_collection_modifyitems(config, items):
    """Order the units longest first and keep CAMPAIGN_FILES true: a test of the campaign in
    another file would run a second campaign on the other worker."""
    stray = sorted({i.nodeid.split("::")[0] for i in items if "campaign" in i.fixturenames} - set(CAMPAIGN_FILES))
    if stray:
        raise pytest.UsageError(f"tests/conftest.py: add {', '.join(stray)} to CAMPAIGN_FILES (its tests use the campaign)")
    rank = {unit: n for n, unit in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))  # stable: file order otherwise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test, set-up to teardown, holds the checkout lock: exclusively when it changes the
    checkout's files, else shared (tests/checkout_lock.py says why)."""
    with checkout_lock.held(ROOT / ".build" / "pytest", item.get_closest_marker("changes_checkout") is not None):
        return (yield)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        """pytest-xdist's loadscope with the units above, in collection order (not its
        `--dist loadgroup`: xdist 3.8 tags the groups on `item._nodeid`, which pytest 9.2 no
        longer reads, so every group would be split)."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # keep the longest-first order
    return ByWorkUnit(config, log)


@pytest.fixture(scope="session")
def campaign(tmp_path_factory):
    """The tiny pipeline run locally once per session (integration, report, README, cluster
    tests). RESID_TEST_CAMPAIGN=DIR reuses a finished one (a copy of such a session's
    pipeline0) while working on the tests of its outputs. The cluster test (`make
    test-cluster`, read-only on it) reuses the snapshot `make test` left of the same inputs
    (tests/campaign_snapshot.py) rather than running the same local campaign again."""
    env = pipeline_env()
    if os.environ.get("RESID_TEST_CAMPAIGN"):
        return Path(os.environ["RESID_TEST_CAMPAIGN"]), env
    work = tiny_workdir(tmp_path_factory.mktemp("pipeline"))
    key = campaign_snapshot.key(tiny_config(engine_build_dir(work)), engine_build_dir(work))
    if os.environ.get("RESID_TEST_CAMPAIGN_SNAPSHOT") == "reuse" and (kept := campaign_snapshot.find(key)):
        print(f"\nthe local tiny campaign: reusing {kept} (the same inputs, made by make test)")
        return kept, env
    proc = snakemake(work, "figures", "--cores", "2", "--resources", "storage_exclusive=1", env=env)
    if proc.returncode != 0:
        pytest.fail("snakemake failed:\n" + proc.stderr[-4000:])
    campaign_snapshot.publish(key, work)
    return work, env
