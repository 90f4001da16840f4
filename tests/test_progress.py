"""The campaign's progress line: cells done per study out of the config's cells, and an
estimate measured from the cells finished in this session."""

import json
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, snakemake, tiny_workdir
from residency.campaigns import progress


def _config() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _finish(root: Path, cell: str, wall_s: float) -> None:
    p = root / cell
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"wall_s": wall_s}))


def test_study_runs_count_every_cell_of_the_default_config():
    runs = progress.study_runs(_config())
    cfg = _config()
    ps, pm = cfg["pager_synthetic"], cfg["pager_model"]
    reps = cfg["harness"]["overhead_reps"]
    main = len(ps["main"]["arms"]) * len(ps["main"]["ratios"]) * ps["main"]["reps"]
    s = ps["stress"]
    stress = len(s["arms"]) * len(s["signals"]) * len(s["threads"]) * len(s["compute_us"]) * s["reps"]
    calib = len({*ps["main"]["arms"], *s["arms"]}) * reps * len({ps["main"]["threads"], *s["threads"]})
    assert len(runs["pager_synthetic"]) == main + stress + calib
    assert len(runs["pager_model"]) == (len(pm["arms"]) * (len(pm["ratios"]) * pm["reps"] + reps) + pm["baseline_reps"]
                                        + pm["roofline_reps"])
    assert len(runs["matched_source"]) == 2 + 2 * len(cfg["matched_source"]["pairs"])
    assert len(runs["reclaim"]) == 2 * cfg["reclaim"]["reps"] and len(runs["certificate"]) == 2
    f = cfg["faults"]  # every cell and an oracle per adapter, and the reset/warm cell
    assert len(runs["faults"]) == len(f["adapters"]) * (len(f["cells"]) + 1) + 1
    # calibration, then per task the resident oracle, every nonresident control and the candidate
    assert len(runs["tasks"]) == reps + (2 + len(cfg["tasks"]["controls"])) * cfg["tasks"]["n"]
    assert all(len(set(r)) == len(r) for r in runs.values())


def test_the_line_counts_done_cells_and_estimates_from_this_session(tmp_path):
    studies = {"a": ["a/1", "a/2", "a/3", "a/4"], "b": ["b/1", "b/2"]}
    _finish(tmp_path, "a/1", 100.0)  # done before: counted, not timed
    t = progress.Tracker(studies, root=tmp_path, started=0.0)
    assert t.line(now=1.0).startswith("progress: cells done: a 1/4, b 0/2;")
    assert "no estimate before a cell is done" in t.line(now=1.0)
    _finish(tmp_path, "a/2", 2.0)
    assert t.poll() and not t.poll()
    # b has no cell of its own yet: it gets a's mean, and the line says the estimate is rough.
    # 4 s elapsed, 2 s in the engine: 2 s per cell outside it; 2 x (2 + 2) + 2 x (2 + 2).
    assert t.remaining_s(4.0) == (16.0, True)
    assert t.line(now=4.0).endswith("now a; about 16 s left (rough until every study has a cell done)")
    _finish(tmp_path, "b/1", 6.0)
    assert t.poll()
    # 10 s elapsed, 8 s of it in the engine: 1 s per cell outside it.
    assert t.overhead_s(10.0) == 1.0
    # a: 2 left x (2 + 1) s; b: 1 left x (6 + 1) s.
    assert t.remaining_s(10.0) == (13.0, False)
    assert t.line(now=10.0).endswith("a 2/4, b 1/2; now b; about 13 s left")


def test_a_finished_campaign_has_nothing_left(tmp_path):
    studies = {"a": ["a/1"]}
    t = progress.Tracker(studies, root=tmp_path, started=0.0)
    _finish(tmp_path, "a/1", 90.0)
    t.poll()
    assert t.remaining_s(200.0) == (0.0, False)
    assert "about 0 s left" in t.line(now=200.0)
    assert progress._minutes(150) == "2.5 min"


def test_summary_says_where_the_time_went(tmp_path):
    studies = {"a": ["a/1", "a/2"], "b": ["b/1", "b/2"]}
    for cell, start, wall in (("a/1", "00:00:00", 10.0), ("a/2", "00:00:20", 5.0), ("b/1", "00:01:00", 30.0)):
        p = tmp_path / cell
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"started_utc": f"2026-12-01T{start}+00:00", "wall_s": wall}))
    lines = progress.summary(studies, root=tmp_path)
    assert lines == ["time: a: 2 cells, 15 s in the engine", "time: b: 1 cells, 30 s in the engine",
                     "time: all cells: 1.5 min from the first cell's start to the last one's end, 45 s of it outside the engine"]


def test_only_the_requested_cells_are_counted_and_a_stale_one_counts_once_rewritten(tmp_path):
    studies = {"a": ["a/1", "a/2", "a/3"], "b": ["b/1"], "c": ["c/1"]}
    _finish(tmp_path, "a/1", 5.0)  # a stale output its job will write again
    _finish(tmp_path, "c/1", 5.0)  # done and not requested
    want = progress.requested(studies, {"a/1", "a/2", "b/1", "x/other-output"})
    assert want == {"a": ["a/1", "a/2"], "b": ["b/1"]}
    t = progress.Tracker(want, root=tmp_path, started=0.0, to_run=True)
    assert t.line(now=1.0).startswith("progress: cells done: a 0/2, b 0/1;")
    assert not t.poll()  # a/1 is still the stale file
    (tmp_path / "a" / "1").unlink()  # Snakemake removes a job's outputs before it runs
    assert not t.poll()
    _finish(tmp_path, "a/1", 3.0)
    assert t.poll() and t.line(now=4.0).startswith("progress: cells done: a 1/2, b 0/1; now a;")


@pytest.mark.integration
def test_every_cell_the_line_counts_is_a_job_output_and_a_target_needs_only_its_own(tmp_path):
    """The names requested() matches against are the jobs' outputs (a dry run lists them):
    every cell of every study is one, and claims/P1.json alone needs no real-model cell."""
    work = tiny_workdir(tmp_path)
    cfg = yaml.safe_load((work / "config" / "config.yaml").read_text())

    def outputs(*targets):
        p = snakemake(work, "-n", "--cores", "1", *targets)
        assert p.returncode == 0, p.stderr[-2000:]
        return {w for ln in p.stdout.splitlines() if ln.strip().startswith("output:")
                for w in ln.split(":", 1)[1].replace(",", " ").split()}

    studies = progress.study_runs(cfg)
    assert progress.requested(studies, outputs("figures")) == {s: r for s, r in studies.items() if r}
    alone = progress.requested(studies, outputs("claims/P1.json"))
    assert set(alone) == {"pager_synthetic"} and alone["pager_synthetic"] == studies["pager_synthetic"], alone.keys()
