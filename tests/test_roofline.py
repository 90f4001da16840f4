"""The I/O roofline (residency/analysis/roofline.py): the bound on hand-made frames, the gather of the
calibration reads from fake run directories, and what figures 06/07, the model table and P9
make of it."""

import json
import math

import pandas as pd
import pytest

from residency import claims
from residency.render import figures, tables
from residency.gather import pager as gather, roofline as gather_roofline, studies as gather_studies
from residency.core import manifest
from residency.analysis import roofline as rl
from residency.claims import verify

from fixtures import make_roofline_run
from test_model_claims import SETTINGS, project

MIB = 1 << 20


def _runs(baseline_tps, arm_tps):
    """A pager_model frame: valid baseline runs, and D runs at r=0.5 (4 tokens, 1 MiB chunks)."""
    rows = [{"campaign": "baseline", "arm": "kernel-mmap", "r": None, "valid": True, "tokens_per_s": t,
             "run_dir": f"b{i}", "chunk_bytes": MIB, "tokens": 4} for i, t in enumerate(baseline_tps)]
    rows += [{"campaign": "main", "arm": "pager-declared", "r": 0.5, "valid": True, "tokens_per_s": t,
              "run_dir": f"d{i}", "chunk_bytes": MIB, "tokens": 4} for i, t in enumerate(arm_tps)]
    return pd.DataFrame(rows)


def _opt(misses):
    return pd.DataFrame([{"campaign": "main", "arm": "pager-declared", "r": 0.5, "valid": True, "opt_misses": m,
                          "run_dir": f"d{i}"} for i, m in enumerate(misses)])


def _calib(bandwidths, statuses=None):
    statuses = statuses or ["ok"] * len(bandwidths)
    return pd.DataFrame({"status": statuses, "bandwidth_bytes_per_s": bandwidths})


def test_io_bound():
    # OPT: 8 misses of 1 MiB over 4 tokens = 2 MiB per token; bandwidth median 4 MiB/s (the
    # failed rep's 100 MiB/s is not counted): 2 tokens/s, below the 20 tokens/s compute rate
    runs = _runs([10.0, 20.0, 30.0], [1.0, 1.5, 1.6])
    roof = rl.bound(runs, _opt([8, 8, 8]), _calib([2 * MIB, 4 * MIB, 6 * MIB, 100 * MIB],
                                                  ["ok", "ok", "ok", "failed"]))
    row = roof.iloc[0]
    assert row["opt_bytes_per_token"] == 2 * MIB and row["compute_tokens_per_s"] == 20.0
    assert row["io_tokens_per_s"] == pytest.approx(2.0) and row["roofline_tokens_per_s"] == pytest.approx(2.0)
    assert row["bound_by"] == "io"
    frac = rl.fractions(runs, roof)
    assert frac.iloc[0]["fraction_of_roofline"] == pytest.approx(1.5 / 2.0)


def test_compute_bound():
    # 1 GiB/s over 2 MiB per token is 512 tokens/s: the 20 tokens/s compute rate binds
    runs = _runs([10.0, 20.0, 30.0], [5.0, 5.0, 5.0])
    roof = rl.bound(runs, _opt([8, 8, 8]), _calib([1 << 30]))
    assert roof.iloc[0]["bound_by"] == "compute" and roof.iloc[0]["roofline_tokens_per_s"] == 20.0
    assert rl.fractions(runs, roof).iloc[0]["fraction_of_roofline"] == pytest.approx(0.25)


def test_no_completed_calibration_or_baseline_is_an_error():
    runs = _runs([10.0], [1.0])
    with pytest.raises(rl.RooflineError, match="no completed calibration run"):
        rl.bound(runs, _opt([8]), _calib([MIB], ["failed"]))
    with pytest.raises(rl.RooflineError, match="no valid unconstrained baseline"):
        rl.bound(_runs([], [1.0]), _opt([8]), _calib([MIB]))


def test_gather_calibration_runs(tmp_path):
    dirs = [make_roofline_run(tmp_path, 1, wall_ns=4_000_000), make_roofline_run(tmp_path, 2, wall_ns=2_000_000),
            make_roofline_run(tmp_path, 3, status="failed")]
    out = tmp_path / "roofline.parquet"
    gather_roofline.gather_roofline(dirs, out)
    df = pd.read_parquet(out)
    assert list(df.columns) == gather_roofline.SCHEMA.names and list(df["rep"]) == [1, 2, 3]
    assert df["bandwidth_bytes_per_s"].iloc[0] == pytest.approx((8 << 20) / 4e-3)
    assert df["bandwidth_bytes_per_s"].iloc[1] == pytest.approx((8 << 20) / 2e-3)
    assert df["status"].iloc[2] == "failed" and pd.isna(df["bandwidth_bytes_per_s"].iloc[2])
    assert (df["chunk_bytes"] == MIB).all() and (df["depth"] == 1).all() and (df["reads"] == 8).all()
    assert df["manifest_sha256"].notna().all()
    # the study's lineage makes the same table again (verify --deep)
    again = gather_studies.table_from({"study": gather_roofline.STUDY, "run_dirs": sorted(map(str, dirs))})
    assert again.to_pandas().equals(df)


def test_gather_stops_on_a_calibration_changed_after_it_was_recorded(tmp_path):
    d = make_roofline_run(tmp_path, 1)
    doc = json.loads((d / "run.json").read_text())
    doc["wall_ns"] = 1  # a faster disk than measured
    (d / "run.json").write_text(json.dumps(doc))
    with pytest.raises(manifest.ManifestError, match="run.json"):
        gather_roofline.gather_roofline([d], tmp_path / "roofline.parquet")


@pytest.fixture
def study(tmp_path):
    root = project(tmp_path)
    res = root / "results"
    return res / "pager_model.parquet", res / "pager_model_opt.parquet", res / "pager_model_roofline.parquet", root


def test_figures_draw_the_roofline(study, tmp_path, monkeypatch):
    runs, opt, roof_pq, _ = study
    roof, _ = rl.from_parquet(runs, opt, roof_pq)
    drawn = {}
    save = figures._save

    def keep(fig, stem):
        drawn[str(stem)] = [ln for ax in fig.axes for ln in ax.get_lines()]
        save(fig, stem)

    monkeypatch.setattr(figures, "_save", keep)
    figures.fig07_throughput_scaling(runs, opt, tmp_path / "f07", roofline=roof_pq)
    figures.fig06_real_model_bytes(runs, opt, tmp_path / "f06", roofline=roof_pq)
    for stem in ("f07", "f06"):
        assert (tmp_path / f"{stem}.png").stat().st_size > 0 and (tmp_path / f"{stem}.pdf").stat().st_size > 0
    line07 = [ln for ln in drawn[str(tmp_path / "f07")] if ln.get_label().startswith("roofline")]
    assert len(line07) == 1
    assert list(line07[0].get_ydata()) == pytest.approx(list(roof["roofline_tokens_per_s"]))
    line06 = [ln for ln in drawn[str(tmp_path / "f06")] if ln.get_label().startswith("roofline")]
    bw, cr = roof["bandwidth_bytes_per_s"].iloc[0], roof["compute_tokens_per_s"].iloc[0]
    assert len(line06) == 1 and line06[0].get_ydata()[0] == pytest.approx(bw * 4 / cr / 1e9)
    # without the calibration the figures are drawn as before, with no roofline
    figures.fig07_throughput_scaling(runs, opt, tmp_path / "g07")
    assert not [ln for ln in drawn[str(tmp_path / "g07")] if ln.get_label().startswith("roofline")]


def test_model_table_reports_the_fraction_of_the_roofline(study, tmp_path):
    runs, opt, roof_pq, _ = study
    g = tables.pager_model_summary(runs, opt, tmp_path / "pm", roofline=roof_pq)
    roof, frac = rl.from_parquet(runs, opt, roof_pq)
    assert {"roofline_tokens_per_s", "fraction_of_roofline"} <= set(g.columns)
    d = g[(g["arm_row"] == "D (declared)") & (g["r"] == 0.5)].iloc[0]
    df = pd.read_parquet(runs)
    med = df[(df["campaign"] == "main") & (df["arm"] == "pager-declared") & (df["r"] == 0.5) & df["valid"]]["tokens_per_s"].median()
    bound = roof.set_index("r").loc[0.5, "roofline_tokens_per_s"]
    assert d["fraction_of_roofline"] == pytest.approx(med / bound)
    assert math.isnan(g[g["arm_row"] == "baseline (unconstrained)"]["fraction_of_roofline"].iloc[0])
    assert "fraction_of_roofline" in (tmp_path / "pm.csv").read_text().splitlines()[0]
    assert "roofline = min(compute" in (tmp_path / "pm.md").read_text()


def test_p9_reports_each_arms_fraction_without_judging_it(study):
    runs, opt, roof_pq, root = study
    doc = claims.make("P9", root, SETTINGS)
    assert doc["verdict"] == "pass"
    roof = doc["values"]["roofline"]
    _, frac = rl.from_parquet(runs, opt, roof_pq)
    want = frac[(frac["arm"] == "pager-prefetch") & (frac["r"] == 0.75)]["fraction_of_roofline"].iloc[0]
    got = [x for x in roof["fraction_of_roofline"]["pager-prefetch"] if x["r"] == 0.75][0]["fraction"]
    assert got == pytest.approx(want)
    assert set(roof["fraction_of_roofline"]) == {"kernel-mmap", "pager-lru", "pager-declared", "pager-prefetch"}
    assert not [a for a in doc["assertions"] if "roofline" in json.dumps(a)]
    assert "Fraction of the roofline" in doc["headline"]


def test_p9_verifies_deep_through_the_calibration_runs(study):
    _, _, _, root = study
    claims.make("P9", root, SETTINGS)
    assert verify.verify("P9", root, deep=True) == []
    # a calibration run changed after the gather is caught behind P9
    run = next((root / "results" / "runs" / "roofline").glob("rep2")) / "run.json"
    doc = json.loads(run.read_text())
    doc["wall_ns"] = 1
    run.write_text(json.dumps(doc))
    problems = verify.verify("P9", root, deep=True)
    assert problems and any("run.json" in p for p in problems), problems
