"""The matched source campaign: gather with admission and eq. 1, table 6, figure 08,
claims C2 and C8, on fake generate runs shaped like residctl's."""

import json

import numpy as np
import pandas as pd
import pytest

from residency.core import arms
from residency import claims
from residency.render import figures, tables
from residency.gather import pager as gather
from residency.claims import verify
from residency.analysis.pairs import matched_pairs, overlap_bound, pair_records

from fixtures import make_model_run, seal

SETTINGS = {"approx_tolerance": 0.005, "whole_region_min_fraction": 0.99, "p7_max_d_over_opt": 1.13,
            "p8_whole_model_min_fraction": 0.9, "p9_flat_max_ratio": 1.25, "p9_rise_min_ratio": 1.25,
            "p9_monotone_tolerance": 0.05, "c2_bytes_ratio_tolerance": 0.01}
D_WALL = [102.358, 102.228, 100.032, 101.996, 102.202, 101.616]   # reference Table 6
F_WALL = [32.867, 32.820, 32.837, 32.889, 32.887, 32.811]
ORDERS = ["D-F", "D-F", "F-D", "F-D", "D-F", "F-D"]


def cell(root, name, arm, block, position, wall, *, peak, limit, events=0, flip=None, f_alloc=0, windows=8,
         cache=None, f_depth=8, wait_fraction=0.5, threads=1):
    d = make_model_run(root, "matched", "pager-declared", 0.5, position, flip=flip)
    run = json.loads((d / "run.json").read_text())
    if cache is not None:
        run["budget"]["budget_chunks"] = cache
    subs = 1000 if arm in ("D", "F") else 0
    run["source_stats"] = {"engine": {"P": "buffered", "D": "direct", "F": "uring", "oracle": "direct"}[arm],
                           "windows": windows if arm == "F" else 1, "depth": 8 if arm == "F" else 1,
                           "submissions": subs, "completions": subs, "peak_depth": f_depth if arm == "F" else 1,
                           "logical_bytes": 64 << 20, "physical_bytes": 64 << 20, "padding_bytes": 0,
                           "rejections": 0, "cancellations": 0, "windows_free_at_close": windows if arm == "F" else 1,
                           "tickets_outstanding_at_close": 0, "dynamic_allocations": f_alloc if arm == "F" else 0}
    run["counters"]["exposed_source_wait_ns"] = int(wall * wait_fraction * threads * 1e9)  # summed over threads
    if arm == "F":
        run["readahead"] = {"steps_ahead": 0, "max_steps_ahead": 2 + block % 2, "bundles": 10, "chunks": 20}
    run["llama"]["threads"] = threads
    run["generation"]["tokens_per_s"] = 64 / wall
    (d / "run.json").write_text(json.dumps(run))
    h = json.loads((d / "harness.json").read_text())
    h["wall_s"] = wall
    h["meta"].update(source_arm=arm, block=str(block), order=ORDERS[block - 1] if block else "",
                     position=str(position), reserve_bytes=str(16 << 20))
    h["host"]["limit_bytes"] = limit
    h["host"]["grade"] = "hard" if limit else "instrumented"
    h["host"]["cgroup"].update(peak_bytes=peak, limit_events=0, pressure_events=events)
    (d / "harness.json").write_text(json.dumps(h))
    return seal(d)


def project(tmp_path, *, f_wall=F_WALL, flip_f=False, f_alloc=0, f_cache=None, f_depth=8, limit=6 << 20,
            p_at_limit=True, d_wait=None, threads=1):
    """The reference's campaign on fake runs. The default `limit` (4 MiB budget + 2 MiB
    overhead) is below the 8 MiB model: eq. 1 holds. P sits at its limit with limit events
    (inadmissible) unless `p_at_limit` is False; `limit=None` runs P without one."""
    runs = tmp_path / "results" / "runs"
    p_peak, p_events = (limit, 3407) if p_at_limit and limit else (5 << 20, 0)
    dirs = [cell(runs, "oracle", "oracle", 0, 0, 90.0, peak=5 << 20, limit=None, threads=threads),
            cell(runs, "P", "P", 0, 1, 130.0, peak=p_peak, limit=limit, events=p_events, threads=threads)]
    limit = limit or 6 << 20
    pos = 2
    for k, order in enumerate(ORDERS, 1):
        for arm in order.split("-"):
            wall = D_WALL[k - 1] if arm == "D" else f_wall[k - 1]
            dirs.append(cell(runs, f"pair{k}/{arm}", arm, k, pos, wall, peak=5 << 20, limit=limit,
                             flip=5 if (flip_f and arm == "F" and k == 3) else None, f_alloc=f_alloc,
                             cache=f_cache if arm == "F" else None, f_depth=f_depth, threads=threads,
                             wait_fraction=d_wait[k - 1] if d_wait and arm == "D" else 0.5))
            pos += 1
    res = tmp_path / "results"
    ident = res / "model.json"
    ident.write_text(json.dumps({"name": "tiny", "path": "m.gguf", "sha256": "a" * 64}))
    gather.gather_matched_source(dirs, dirs[0], ident, res / "matched_source.parquet")
    (res / "machine.json").write_text(json.dumps({"hostname": "test"}))
    (res / "probe.json").write_text(json.dumps({"cgroup": {"version": 1}}))
    return tmp_path


def test_gather_admission_and_eq1(tmp_path):
    root = project(tmp_path)
    df = pd.read_parquet(root / "results" / "matched_source.parquet")
    assert list(df["position"]) == list(range(14))
    p = df[df["source_arm"] == "P"].iloc[0]
    assert not p["admissible"] and p["limit_events_total"] == 3407 and p["headroom_bytes"] == 0
    df_ = df[df["source_arm"].isin(["D", "F"])]
    assert df_["admissible"].all() and (df_["eq1_margin_bytes"] == (8 << 20) - ((6 << 20) - (16 << 20))).all()
    assert pd.isna(df[df["source_arm"] == "oracle"]["admissible"].iloc[0])


def test_table6_and_figure08(tmp_path):
    root = project(tmp_path)
    out = tables.table6_matched_pairs(root / "results" / "matched_source.parquet", None, tmp_path / "t6")
    assert list(out["Order"]) == ["D->F", "D->F", "F->D", "F->D", "D->F", "F->D"]
    assert out["F/D"].iloc[2] == pytest.approx(32.837 / 100.032, abs=1e-6)
    assert "[0.320092, 0.325761]" in (tmp_path / "t6.md").read_text()
    figures.fig08_matched_source_pairs(root / "results" / "matched_source.parquet", None, tmp_path / "f8")
    assert (tmp_path / "f8.png").stat().st_size > 10000 and (tmp_path / "f8.pdf").exists()


def test_c2_passes_on_the_reference_pairs(tmp_path):
    root = project(tmp_path)
    doc = claims.make("C2", root, SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    w = doc["values"]["wall_f_over_d"]
    assert (round(w["ratio"], 6), round(w["low"], 6), round(w["high"], 6)) == (0.322914, 0.320092, 0.325761)
    assert doc["values"]["p"]["admissible"] is False
    assert verify.verify("C2", root) == [] and verify.replay("C2", root) == []


def test_c2_fails_when_f_is_not_faster(tmp_path):
    root = project(tmp_path, f_wall=[d * (1.0 + 0.01 * ((i % 2) * 2 - 1)) for i, d in enumerate(D_WALL)])
    doc = claims.make("C2", root, SETTINGS)
    assert doc["verdict"] == "fail"
    assert any("/values/wall_f_over_d/high" in r for r in doc["reasons"])


def test_c2_fails_on_inexact_f_and_on_allocations(tmp_path):
    assert claims.make("C2", project(tmp_path / "a", flip_f=True), SETTINGS)["verdict"] == "fail"
    doc = claims.make("C2", project(tmp_path / "b", f_alloc=3), SETTINGS)
    assert doc["verdict"] == "fail" and any("f_no_dynamic_allocation" in r for r in doc["reasons"])


def test_c2_fails_when_f_caches_less_than_d(tmp_path):
    # F's windows paid out of the cache would change what is compared: the capacity is held fixed.
    doc = claims.make("C2", project(tmp_path, f_cache=1), SETTINGS)
    assert doc["verdict"] == "fail" and any("cache_held_fixed" in r for r in doc["reasons"])


def test_c2_fails_when_p_is_admissible(tmp_path):
    # P exact with headroom and no limit event: direct ownership changed nothing here.
    doc = claims.make("C2", project(tmp_path, p_at_limit=False), SETTINGS)
    assert doc["verdict"] == "fail"
    failed = [r for r in doc["reasons"] if r.startswith("failed:")]
    assert len(failed) == 1 and "/values/p/admissible" in failed[0]


def test_c2_p_without_a_hard_limit_is_insufficient(tmp_path):
    doc = claims.make("C2", project(tmp_path, limit=None), SETTINGS)
    assert doc["verdict"] == "insufficient-evidence"
    assert "P ran without a hard host limit: its admission outcome cannot be judged" in doc["reasons"]


def test_c2_fails_when_f_never_has_every_window_in_flight(tmp_path):
    doc = claims.make("C2", project(tmp_path, f_depth=7), SETTINGS)
    assert doc["verdict"] == "fail"
    assert doc["values"]["f_peak_depth_max"] == 7
    assert doc["values"]["f_readahead_max_steps_ahead"] == 3  # the most over F's cells (2 or 3 each)
    assert "read-ahead up to 3 step(s) ahead" in doc["headline"]
    failed = [r for r in doc["reasons"] if r.startswith("failed:")]
    assert len(failed) == 1 and "f_peak_depth_equals_windows" in failed[0]


def bounded_project(tmp_path, *, natural_peak=5 << 20, p_peak=5 << 20, p_events=0, f_peak=3 << 20, limit=6 << 20,
                    reserve=2 << 20, f_depth=8):
    """C8's own campaign on fake runs (residency/campaigns/bounded_source.py): the oracle, P's natural run
    (no limit), then P and F under H_cap = `limit` with R_policy = `reserve`. The 8 MiB model:
    H_cap - R_policy = 4 MiB by default, so eq. 1 holds by 4 MiB, and P's natural peak (5 MiB)
    is below the cap."""
    runs = tmp_path / "results" / "runs"
    spec = [("oracle", "oracle", 0, None, 4 << 20, 0, "bounded"), ("P-natural", "P", 1, None, natural_peak, 0,
            "bounded-natural"), ("P", "P", 2, limit, p_peak, p_events, "bounded"), ("F", "F", 3, limit, f_peak, 0,
                                                                                  "bounded")]
    dirs = []
    for name, arm, pos, lim, peak, events, campaign in spec:
        d = cell(runs, name, arm, 1 if campaign == "bounded" and arm in "PF" else 0, pos, 10.0, peak=peak,
                 limit=lim, events=events, f_depth=f_depth)
        h = json.loads((d / "harness.json").read_text())
        h["meta"].update(campaign=campaign, reserve_bytes=str(reserve))
        (d / "harness.json").write_text(json.dumps(h))
        dirs.append(seal(d))
    res = tmp_path / "results"
    ident = res / "model.json"
    ident.write_text(json.dumps({"name": "tiny", "path": "m.gguf", "sha256": "a" * 64}))
    gather.gather_matched_source(dirs, dirs[0], ident, res / "bounded_source.parquet")
    (res / "machine.json").write_text(json.dumps({"hostname": "test"}))
    (res / "probe.json").write_text(json.dumps({"cgroup": {"version": 1}}))
    return tmp_path


def test_c8_passes_at_its_own_operating_point(tmp_path):
    doc = claims.make("C8", bounded_project(tmp_path), SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    v = doc["values"]
    assert v["peak_reduction_fraction"] == pytest.approx(1 - 3 / 5)
    assert v["premise"] == {"h_cap_bytes": 6 << 20, "p_natural_peak_bytes": 5 << 20, "p_natural_below_cap": True}
    # S = 8 MiB, H_cap - R_policy = 6 - 2 MiB: margin 4 MiB in both cells
    assert v["eq1"]["cells"] == ["P", "F"] and v["eq1"]["margin_bytes"] == [4 << 20] * 2
    assert v["admissible"] == [True, True] and [r["revision"] for r in v["protocol_revisions"]][-1] == "C8 r1 (issue 22)"


@pytest.mark.parametrize("kw, failing", [
    (dict(natural_peak=6 << 20, p_peak=6 << 20, p_events=40), ["/values/premise/p_natural_below_cap",
                                                                "/values/admissible"]),  # P clipped at the cap
    (dict(limit=12 << 20), ["/values/eq1/holds"]),  # H_cap - R_policy = 10 MiB: the 8 MiB model fits
    (dict(f_peak=(5 << 20) + (1 << 19)), ["/values/f_peak_below_p"]),  # above P, below the cap
    (dict(f_depth=5), ["/values/f_peak_depth_equals_windows"]),
])
def test_c8_fails_naming_what_does_not_hold(tmp_path, kw, failing):
    doc = claims.make("C8", bounded_project(tmp_path, **kw), SETTINGS)
    assert doc["verdict"] == "fail"
    got = [r.split()[1].rstrip(":") for r in doc["reasons"] if r.startswith("failed:")]
    assert got == failing, doc["reasons"]


def frame(rows):
    """Matched-source rows (source_arm, block, order, position, wall_s), as gather writes them."""
    return pd.DataFrame(rows, columns=["source_arm", "block", "order", "position", "wall_s"])


def test_pairs_are_in_block_order_and_complete():
    df = frame([("oracle", 0, None, 0, 9.0), ("P", 0, None, 1, 13.0),
                ("F", 2, "F-D", 2, 3.0), ("D", 2, "F-D", 3, 10.0),
                ("D", 1, "D-F", 4, 11.0), ("F", 1, "D-F", 5, 4.0),
                ("D", 3, "D-F", 6, 12.0)])  # block 3 lacks its F cell: not a pair
    pairs = matched_pairs(df)
    d, f = pairs[arms.DIRECT], pairs[arms.ASYNC]
    assert list(d["block"]) == [1, 2] and list(f["block"]) == [1, 2]
    assert list(d["order"]) == ["D-F", "F-D"]
    assert list(d["wall_s"]) == [11.0, 10.0] and list(f["wall_s"]) == [4.0, 3.0]
    recs = pair_records(pairs)
    assert [(r["D"]["position"], r["F"]["position"]) for r in recs] == [(4, 5), (3, 2)]
    assert type(recs[0]["D"]["block"]) is int  # plain values, ready for a claim record


def test_a_rerun_cell_replaces_the_earlier_one():
    df = frame([("D", 1, "D-F", 2, 11.0), ("F", 1, "D-F", 3, 4.0), ("D", 1, "D-F", 4, 12.0)])
    assert list(matched_pairs(df)[arms.DIRECT]["wall_s"]) == [12.0]


def test_no_pairs():
    pairs = matched_pairs(frame([("oracle", 0, None, 0, 9.0), ("P", 0, None, 1, 13.0)]))
    assert len(pairs) == 0 and pair_records(pairs) == []


def test_table6_figure08_and_c2_read_the_same_pairs(tmp_path):
    root = project(tmp_path)
    runs = root / "results" / "matched_source.parquet"
    out = tables.table6_matched_pairs(runs, None, tmp_path / "t6")
    doc = claims.make("C2", root, SETTINGS)
    pairs = matched_pairs(pd.read_parquet(runs))
    assert list(out["Block"]) == [p["block"] for p in doc["values"]["pairs"]] == list(pairs[arms.DIRECT]["block"])
    assert list(out["D (s)"]) == D_WALL and list(out["F (s)"]) == F_WALL
    assert [p["f_wall_s"] for p in doc["values"]["pairs"]] == F_WALL


def test_overlap_bound_of_hand_made_d_cells():
    # D waits io of its wall; the rest is compute c: a perfect overlap takes max(c, io).
    assert overlap_bound(10.0, 3_000_000_000, 1) == pytest.approx(0.7)
    assert overlap_bound(10.0, 6_000_000_000, 1) == pytest.approx(0.6)
    assert overlap_bound(10.0, 5_000_000_000, 1) == pytest.approx(0.5)   # the floor: io = c
    # the wait is summed over compute threads: 6 thread-seconds of 2 threads is 3 s each
    assert overlap_bound(10.0, 6_000_000_000, 2) == pytest.approx(0.7)
    assert overlap_bound(10.0, 12_000_000_000, 1) == pytest.approx(1.0)  # io at most the wall
    for args in ((10.0, None, 1), (0.0, 1, 1), (None, 1, 1), (10.0, 1, None)):
        assert overlap_bound(*args) is None, args


def test_c2_reports_f_over_d_against_the_overlap_bound(tmp_path):
    waits = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    doc = claims.make("C2", project(tmp_path, d_wait=waits, threads=2), SETTINGS)
    v = doc["values"]
    bounds = [max(w, 1 - w) for w in waits]
    assert [p["overlap_bound"] for p in v["pairs"]] == pytest.approx(bounds, abs=1e-6)
    gm = float(np.exp(np.mean(np.log(bounds))))
    assert v["overlap_bound"] == pytest.approx(gm, abs=1e-6)
    ob = v["wall_f_over_d_over_overlap_bound"]
    assert ob["ratio"] == pytest.approx(v["wall_f_over_d"]["ratio"] / gm, rel=1e-9)
    assert ob["ratios"] == pytest.approx([f / d / b for f, d, b in zip(F_WALL, D_WALL, bounds)], rel=1e-6)
    assert ob["low"] < ob["ratio"] < ob["high"]
    assert v["compute_threads"] == [2] and "compute threads 2" in doc["headline"]
    assert f"{ob['ratio']:.4f}" in doc["headline"] and f"{gm:.4f}" in doc["headline"]


def test_c2_verdict_does_not_judge_the_overlap_bound(tmp_path):
    # F 0.8 of D is 1.6x the bound 0.5: reported, not asserted (the reference's assertions only).
    doc = claims.make("C2", project(tmp_path, f_wall=[d * 0.8 for d in D_WALL]), SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    assert doc["values"]["wall_f_over_d_over_overlap_bound"]["ratio"] == pytest.approx(1.6, rel=1e-6)
