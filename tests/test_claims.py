"""Claim records computed from small fixtures: verdicts follow the measurements, missing
evidence gives insufficient-evidence, verify catches changed inputs, replay recomputes."""

import json

import pytest

from residency.analysis import opt as analysis
from residency import claims
from residency.gather import pager as gather
from residency.claims import verify
from residency.claims import record

from fixtures import make_run, region_identity, seal

SETTINGS = {"approx_tolerance": 0.005, "whole_region_min_fraction": 0.99}


def shift_an_eviction_stamp(run_dir):
    """Move the run's first eviction record one step later: a trace that differs only in the
    pager's stamp of an event, its access outcomes unchanged."""
    path = run_dir / "trace.bin"
    raw = bytearray(path.read_bytes())
    for off in range(32, len(raw), 16):
        if raw[off + 8] == 4:  # kind: eviction
            raw[off:off + 4] = (int.from_bytes(raw[off:off + 4], "little") + 1).to_bytes(4, "little")
            break
    path.write_bytes(bytes(raw))
    seal(run_dir)  # as the engine would have recorded it


def project(tmp_path, *, d_extra=(), lru_physical=1.0, racy_extra=(16,), exact_extra=(), stress_sync="none",
            exact_stamp_shift=False):
    """Main campaign (lockstep) and a stress matrix; `racy_extra` / `exact_extra` make rep 2 of
    arm D's t=4 cells under that signal miss once more (a differing trace); `exact_stamp_shift`
    moves an eviction stamp in rep 2 of the exact signal's D t=4 c=200 cell instead."""
    runs = tmp_path / "results" / "runs"
    dirs = []
    for arm in ("kernel-mmap", "pager-lru", "pager-declared"):
        for r in (0.25, 0.5):
            for rep in (1, 2, 3):
                dirs.append(make_run(runs, "main", arm, r, rep, physical_fraction=lru_physical if arm == "pager-lru" else 1.0,
                                     extra_miss_steps=d_extra if arm == "pager-declared" and rep == 3 else ()))
    for arm in ("pager-lru", "pager-declared"):
        for signal in ("all-threads-finished", "thread0-started"):
            for t in (1, 2, 4):
                for c in (0, 200):
                    for rep in (1, 2):
                        extra = racy_extra if signal == "thread0-started" else exact_extra
                        extra = extra if (arm == "pager-declared" and rep == 2 and t == 4) else ()
                        dirs.append(make_run(runs, "stress", arm, 0.5, rep, threads=t, compute_us=c, signal=signal,
                                             sync=stress_sync, jitter_us=400 if c else 0, extra_miss_steps=extra))
                        if exact_stamp_shift and (arm, signal, t, c, rep) == (
                                "pager-declared", "all-threads-finished", 4, 200, 2):
                            shift_an_eviction_stamp(dirs[-1])
    res = tmp_path / "results"
    gather.gather_pager_synthetic(dirs, region_identity(tmp_path), res / "pager_synthetic.parquet")
    analysis.analyse_pager_synthetic(res / "pager_synthetic.parquet", res / "pager_synthetic_opt.parquet",
                                     res / "pager_synthetic_determinism.parquet")
    (res / "machine.json").write_text(json.dumps({"hostname": "test"}))
    (res / "probe.json").write_text(json.dumps({"userfaultfd": {"how": "syscall"}, "o_direct": {"min_alignment": 512},
                                                "io_uring": {"supported": True},
                                                "cgroup": {"version": 1, "writable": True}}))
    return tmp_path


@pytest.mark.parametrize("cid", ["P1", "P4", "P5"])
def test_claims_pass_on_consistent_measurements(tmp_path, cid):
    root = project(tmp_path)
    doc = claims.make(cid, root, SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    assert doc["scope"]["engine_sha256"] == "e" * 64
    assert doc["scope"]["kernel_features"]["cgroup_version"] == 1
    assert [i["path"] for i in doc["inputs"]][-2:] == ["results/machine.json", "results/probe.json"]
    assert all(len(i["sha256"]) == 64 for i in doc["inputs"])
    assert verify.verify(cid, root) == []
    assert verify.replay(cid, root) == []


def test_p1_fails_when_lru_reads_less_than_the_region(tmp_path):
    root = project(tmp_path, lru_physical=0.5)
    doc = claims.make("P1", root, SETTINGS)
    assert doc["verdict"] == "fail"
    assert any("read_whole_region_every_pass" in r for r in doc["reasons"])


def test_p4_fails_and_says_by_how_much(tmp_path):
    root = project(tmp_path, d_extra=(16,))
    doc = claims.make("P4", root, SETTINGS)
    assert doc["verdict"] == "fail"
    assert doc["values"]["excess_misses_max"] == 1
    assert doc["values"]["d_over_opt_max"] > 1.0
    assert any("d_equals_opt" in r for r in doc["reasons"])


def test_p4_asserts_the_lockstep_cells_and_reports_the_free_running_ones(tmp_path):
    # Free-running stress cells: the exact signal trails the fastest thread, so D may miss
    # more than OPT there; P4's statement is about the lockstep scan, and says so.
    doc = claims.make("P4", project(tmp_path / "a", exact_extra=(16,)), SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    assert all(c["campaign"] == "main" for c in doc["values"]["cells"])
    assert doc["values"]["free_running"]["runs"] == 12 and doc["values"]["free_running"]["d_over_opt_max"] > 1
    # The same extra miss in lockstep stress cells is asserted, and fails.
    doc = claims.make("P4", project(tmp_path / "b", exact_extra=(16,), stress_sync="step"), SETTINGS)
    assert doc["verdict"] == "fail" and any("d_equals_opt" in r for r in doc["reasons"])


def test_p5_passes_when_the_racy_signal_differs_and_the_exact_one_does_not(tmp_path):
    doc = claims.make("P5", project(tmp_path), SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    assert doc["values"]["racy_signal_cells_differing"] == 2  # t=4, compute 0 and 200
    assert doc["values"]["exact_signal_cells_per_arm"] == {"pager-lru": 6, "pager-declared": 6}
    assert doc["values"]["race_possible_cells"] == 8  # t=2 and t=4, both arms, both compute phases
    racy, exact = doc["values"]["contrast"]["thread0-started"], doc["values"]["contrast"]["all-threads-finished"]
    assert racy["cells_differing"] == 2 and exact["cells_differing"] == 0
    assert racy["distinct_traces"] == exact["distinct_traces"] + 2 == 10
    assert racy["distinct_outcomes"] == exact["distinct_outcomes"] + 2 == 10
    assert racy["demand_fills_range"] == exact["demand_fills_range"] and None not in racy["demand_fills_range"]
    jitter = {(c["compute_us"], c["jitter_us"]) for c in doc["values"]["racy_signal_cells"]}
    assert jitter == {(0, 0), (200, 400)}


def test_p5_fails_naming_the_racy_half_when_the_race_never_showed(tmp_path):
    doc = claims.make("P5", project(tmp_path, racy_extra=()), SETTINGS)
    assert doc["verdict"] == "fail"
    failed = [r for r in doc["reasons"] if r.startswith("failed:")]
    assert len(failed) == 1 and "racy half" in failed[0]


def test_p5_fails_naming_the_exact_half_when_it_is_not_deterministic(tmp_path):
    doc = claims.make("P5", project(tmp_path, exact_extra=(16,)), SETTINGS)
    assert doc["verdict"] == "fail"
    failed = [r for r in doc["reasons"] if r.startswith("failed:")]
    assert len(failed) == 1 and "exact half" in failed[0]
    assert doc["values"]["exact_signal_deterministic"].count(False) == 2


def test_p5_judges_free_running_cells_on_their_access_outcomes(tmp_path):
    # Free-running: an event stamp moved by timing is not a different decision.
    doc = claims.make("P5", project(tmp_path / "a", exact_stamp_shift=True), SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    cell = [c for c in doc["values"]["exact_signal_cells"] if not c["identical"]]
    assert len(cell) == 1 and cell[0]["distinct_traces"] == 2 and cell[0]["distinct_outcomes"] == 1
    assert cell[0]["deterministic"] and doc["values"]["contrast"]["all-threads-finished"]["cells_traces_differing"] == 1
    # Lockstep: the whole trace is the decision record, so the same change is a difference.
    doc = claims.make("P5", project(tmp_path / "b", exact_stamp_shift=True, stress_sync="step"), SETTINGS)
    assert doc["values"]["exact_signal_deterministic"].count(False) == 1
    assert any(r.startswith("failed:") and "exact half" in r for r in doc["reasons"])


def test_p5_lockstep_stress_cells_cannot_show_the_racy_half(tmp_path):
    # Lockstep drivers with the pager's consumer protection cannot race (0 of 12 cells
    # differed before the stress cells ran free): not a pass, and not a fail either.
    doc = claims.make("P5", project(tmp_path, racy_extra=(), stress_sync="step"), SETTINGS)
    assert doc["verdict"] == "insufficient-evidence"
    assert any(r.startswith("racy half: no stress cell where the race can happen") for r in doc["reasons"])


def test_missing_evidence_is_insufficient_not_pass(tmp_path):
    root = project(tmp_path)
    import pandas as pd
    p = root / "results" / "pager_synthetic.parquet"
    df = pd.read_parquet(p)
    df[df["arm"] != "pager-lru"].to_parquet(p, index=False)
    doc = claims.make("P1", root, SETTINGS)
    assert doc["verdict"] == "insufficient-evidence"
    assert any("no arm C" in r for r in doc["reasons"])


def test_verify_catches_a_changed_input_and_a_tampered_verdict(tmp_path):
    root = project(tmp_path)
    claims.make("P4", root, SETTINGS)
    rec_path = root / "claims" / "P4.json"
    doc = json.loads(rec_path.read_text())
    doc["verdict"] = "fail"
    rec_path.write_text(json.dumps(doc))
    assert any("verdict" in p for p in verify.verify("P4", root))
    claims.make("P4", root, SETTINGS)
    opt = root / "results" / "pager_synthetic_opt.parquet"
    opt.write_bytes(opt.read_bytes() + b"x")
    assert any("input changed" in p for p in verify.verify("P4", root))


def test_ledger_digest_checked(tmp_path):
    root = project(tmp_path)
    for cid in ("P1", "P4"):
        claims.make(cid, root, SETTINGS)
    claims.ledger([root / "claims" / "P1.json", root / "claims" / "P4.json"], root / "claims" / "ledger.json")
    assert verify.verify("P1", root) == []
    p = root / "claims" / "P1.json"
    doc = json.loads(p.read_text())
    doc["headline"] += " (edited)"
    p.write_text(json.dumps(doc))
    assert any("ledger" in x for x in verify.verify("P1", root))


@pytest.mark.parametrize("op, got, want, tol, ok", [
    ("eq", 1, 1, None, True), ("eq", 1, 2, None, False),
    ("approx", 1.004, 1.0, 0.005, True), ("approx", 1.006, 1.0, 0.005, False),
    ("lt", 0.9, 1, None, True), ("ge", 0.9, 1, None, False),
    ("all_true", [True, True], None, None, True), ("all_true", [True, False], None, None, False),
])
def test_assertion_ops(op, got, want, tol, ok):
    doc = {"values": {"x": got}}
    a = {"pointer": "/values/x", "op": op, "value": want}
    if tol is not None:
        a["tolerance"] = tol
    assert record.check(a, doc)[0] is ok


def test_unresolvable_pointer_is_unevaluable():
    assert record.check({"pointer": "/values/nope", "op": "eq", "value": 1}, {"values": {}})[0] is None
    assert record.check({"pointer": "/values/x", "op": "all_true"}, {"values": {"x": []}})[0] is None


@pytest.mark.parametrize("pointer", ["/values/p/exact", "/values/xs/3", "/values/xs/-", "/values/xs/01",
                                     "values/xs", "/values/name/0"])
def test_a_pointer_that_names_nothing_is_unevaluable(pointer):
    doc = {"values": {"p": None, "xs": [1, 2, 3], "name": "abc"}}
    with pytest.raises(record.PointerError):
        record.resolve(doc, pointer)
    ok, why = record.check({"pointer": pointer, "op": "eq", "value": 1}, doc)
    assert ok is None and why == f"{pointer}: no such value"


def test_pointers_follow_rfc6901():
    doc = {"values": {"a/b": {"~k": [10, 20]}}}
    assert record.resolve(doc, "/values/a~1b/~0k/1") == 20
    assert record.resolve(doc, "") is doc
