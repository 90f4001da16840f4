"""The utility tasks (claims C5, C6, C11): the seeded generator, the token-F1 scorer, the
cells' flags, and the three claims on fixture tables where each passes and where it fails."""

import copy
import shlex

import pandas as pd
import pytest
import yaml

from residency import config as residency_config
from residency import tasks
from residency.claims import c5, c6, c11, record

from conftest import ROOT

SETTINGS = {"c5_f1_tolerance": 0.0, "c11_f1_threshold": 0.5, "c11_required_fraction": 1.0}


def _config():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


# ---- the generator --------------------------------------------------------------------------


def test_same_seed_same_tasks_and_another_seed_other_tasks():
    assert tasks.generate(3, 6) == tasks.generate(3, 6)
    assert tasks.generate(3, 6) != tasks.generate(4, 6)
    assert tasks.generate(3, 6)[:3] == tasks.generate(3, 3)  # n only adds tasks at the end


def test_answers_are_spans_of_their_passage_and_the_question_is_unambiguous():
    for t in tasks.generate(1, 30):
        start = t["answer_start"]
        assert t["passage"][start:start + len(t["answer"])] == t["answer"]
        sentence = next(s for s in t["passage"].split(". ") if start <= t["passage"].index(s) + len(s)
                        and t["passage"].index(s) <= start)
        assert t["answer"] in sentence
        assert t["passage"].count(t["answer"]) == 1 or t["kind"] == "count"
    assert [t["id"] for t in tasks.generate(1, 3)] == ["t00", "t01", "t02"]
    assert {t["kind"] for t in tasks.generate(1, 3)} == {"place", "person", "count"}


def test_prompt_holds_passage_and_question_and_ends_in_answer():
    t = tasks.generate(1, 1)[0]
    p = tasks.prompt(t)
    assert t["passage"] in p and t["question"] in p and p.endswith("\nAnswer:")


def test_the_answer_is_the_first_line_of_the_generated_text():
    assert tasks.answer_of(" Porto.\nQuestion: who") == "Porto."
    assert tasks.answer_of("\n\n  Lyon \nmore") == "Lyon"
    assert tasks.answer_of("") == ""


# ---- the scorer -------------------------------------------------------------------------------


@pytest.mark.parametrize("pred, ref, want", [
    ("Porto", "Porto", 1.0),
    ("porto.", "Porto", 1.0),                         # case and punctuation
    ("The Porto", "Porto", 1.0),                      # articles
    ("in Porto", "Porto", 2 * 0.5 * 1.0 / 1.5),       # precision 1/2, recall 1
    ("Ilse", "Ilse Okafor", 2 * 1.0 * 0.5 / 1.5),     # precision 1, recall 1/2
    ("Lyon", "Porto", 0.0),
    ("", "Porto", 0.0),
    ("the", "Porto", 0.0),                            # nothing left after normalization
    ("55 55", "55", 2 * 0.5 * 1.0 / 1.5),             # multiset overlap: one 55 matches
    ("Ilse Okafor Ilse", "Ilse Okafor", 2 * (2 / 3) * 1.0 / (2 / 3 + 1)),
])
def test_token_f1(pred, ref, want):
    assert tasks.f1(pred, ref) == pytest.approx(want)


def test_normalize_and_exact_match():
    assert tasks.normalize("  The  Red, Kettle! an apple ") == "red kettle apple"
    assert tasks.exact_match("the Porto.", "Porto") and not tasks.exact_match("Porto Lyon", "Porto")
    assert tasks.f1("", "") == 1.0


# ---- the cells ----------------------------------------------------------------------------------


def test_control_is_the_resident_path_and_the_candidate_a_pager_arm_under_the_limit():
    cfg = _config()
    ctrl = shlex.join(tasks.generate_args(cfg, "control", "m.gguf", 123))
    cand = shlex.join(tasks.generate_args(cfg, "candidate", "m.gguf", 123))
    assert "--arm kernel-mmap" in ctrl and "--budget-bytes" not in ctrl and "--graph-plan" not in ctrl
    assert f"--arm {cfg['tasks']['arm']}" in cand and "--budget-bytes 123" in cand
    assert f"--tokens {cfg['tasks']['tokens']}" in cand and f"--ctx {cfg['tasks']['ctx']}" in cand
    h_ctrl = shlex.join(tasks.harness_args(cfg, "control", 123, "o.json", 1000, "t00"))
    h_cand = shlex.join(tasks.harness_args(cfg, "candidate", 123, "o.json", 1000, "t00"))
    assert "--budget-bytes" not in h_ctrl and "--meta role=control" in h_ctrl
    assert h_cand.startswith("--budget-bytes 123 --overhead o.json ") and "--meta r=0.5" in h_cand
    assert "--meta config_digest=" + tasks.tasks_digest(cfg) in h_cand


def test_runs_and_digest_follow_the_tasks_section():
    cfg = _config()
    runs = tasks.task_runs(cfg)
    assert len(runs) == 2 * cfg["tasks"]["n"] and runs[0] == "results/runs/tasks/t00/control/harness.json"
    other = copy.deepcopy(cfg)
    other["tasks"]["seed"] += 1
    assert tasks.tasks_digest(other) != tasks.tasks_digest(cfg)


@pytest.mark.parametrize("change, needle", [
    (lambda c: c["tasks"].pop("seed"), "seed"),
    (lambda c: c["tasks"].update(extra=1), "extra"),
    (lambda c: c["tasks"].update(arm="kernel-mmap"), "arm"),
    (lambda c: c["claims"].pop("c11_f1_threshold"), "c11_f1_threshold"),
])
def test_the_schema_checks_the_tasks_section(change, needle):
    cfg = _config()
    change(cfg)
    with pytest.raises(residency_config.ConfigError, match=needle):
        residency_config.validate(cfg)


# ---- the claims on fixture tables ----------------------------------------------------------------


def _row(task, role, f1, *, status="ok", wall=1.0, grade="hard", peak=90, limit=100, events=0, oom=0,
         tokens_equal=True):
    cand = role == "candidate"
    ok = None if grade != "hard" else (peak < limit and events == 0 and oom == 0)
    return {"task": task, "kind": "place", "role": role, "arm": "pager-declared" if cand else "kernel-mmap",
            "r": 0.5 if cand else None, "status": status, "error": None if status == "ok" else "boom",
            "reference": "Porto", "answer": "Porto" if f1 == 1.0 else "Lyon", "f1": f1 if status == "ok" else None,
            "tokens_equal_control": tokens_equal if cand else None, "wall_s": wall,
            "host_grade": grade if cand else "unenforced", "limit_bytes": limit if cand else None,
            "peak_bytes": peak, "limit_events": events if cand else None, "oom_kills": oom if cand else None,
            "resource_ok": ok if cand else None}


def _table(ctrl, cand, **kw):
    rows = []
    for i, (a, b) in enumerate(zip(ctrl, cand)):
        rows += [_row(f"t{i:02d}", "control", a), _row(f"t{i:02d}", "candidate", b, wall=2.0, **kw)]
    return {"tasks": pd.DataFrame(rows)}


def _verdict(mod, frames, settings=SETTINGS):
    res = mod.compute(frames, settings)
    doc = {"values": record.plain(res.values), "assertions": [a.as_dict() for a in res.assertions]}
    return record.verdict_of(doc, res.insufficient), doc["values"]


def test_c5_equal_f1_leaves_only_the_named_cycle_half_unshown():
    (verdict, reasons), v = _verdict(c5, _table([1.0, 0.0], [1.0, 0.0]))
    assert verdict == "insufficient-evidence"
    assert len(reasons) == 1 and "favourable-cycle half" in reasons[0]
    assert v["aggregate_f1_delta"] == 0.0 and v["cycle"]["total_candidate_over_control"] == 2.0


def test_c5_fails_on_unequal_f1_and_a_tolerance_set_before_the_runs_can_admit_it():
    (verdict, reasons), _ = _verdict(c5, _table([1.0, 0.0], [1.0, 0.5]))
    assert verdict == "fail" and any("abs_aggregate_f1_delta" in r for r in reasons)
    (verdict, reasons), _ = _verdict(c5, _table([1.0, 0.0], [1.0, 0.5]), dict(SETTINGS, c5_f1_tolerance=0.3))
    assert verdict == "fail" and any("task_f1_equal" in r for r in reasons)  # task-level F1 still differs


def test_c5_an_unfinished_run_is_insufficient_evidence():
    frames = _table([1.0], [1.0])
    frames["tasks"].loc[1, ["status", "f1"]] = ["oom-killed", None]
    (verdict, reasons), _ = _verdict(c5, frames)
    assert verdict == "insufficient-evidence" and any("oom-killed" in r for r in reasons)


def test_c6_zero_margin_met_and_missed():
    (verdict, reasons), _ = _verdict(c6, _table([1.0, 0.5], [1.0, 0.5]))
    assert verdict == "insufficient-evidence" and len(reasons) == 1 and "request-plus-reset" in reasons[0]
    (verdict, reasons), v = _verdict(c6, _table([1.0, 0.5], [1.0, 0.4]))
    assert verdict == "fail" and v["aggregate_f1_delta"] == pytest.approx(-0.05)
    assert any("zero-margin" in r for r in reasons)


def test_c11_passes_when_resources_pass_and_the_line_stops():
    (verdict, reasons), v = _verdict(c11, _table([1.0, 1.0], [1.0, 0.0]))
    assert verdict == "pass", reasons
    assert v["admission"] == "stop" and v["correct"] == 1 and v["required_correct"] == 2


def test_c11_fails_when_the_line_is_admitted():
    (verdict, reasons), v = _verdict(c11, _table([1.0, 1.0], [1.0, 0.5]))
    assert v["admission"] == "admit" and verdict == "fail" and any("admission" in r for r in reasons)
    (verdict, _), v = _verdict(c11, _table([1.0, 1.0], [1.0, 0.0]), dict(SETTINGS, c11_required_fraction=0.5))
    assert v["admission"] == "admit" and verdict == "fail"


def test_c11_fails_when_the_resource_predicate_fails_and_needs_a_hard_limit():
    (verdict, reasons), v = _verdict(c11, _table([1.0], [0.0], events=3))
    assert v["resources_passed"] is False and verdict == "fail" and any("resources_passed" in r for r in reasons)
    (verdict, reasons), _ = _verdict(c11, _table([1.0], [0.0], grade="instrumented"))
    assert verdict == "insufficient-evidence" and any("hard host limit" in r for r in reasons)
