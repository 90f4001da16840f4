"""The utility tasks (claims C5, C6, C11): the seeded generator, the token-F1 scorer, the
cells' flags, and the three claims on fixture tables where each passes and where it fails."""

import copy
import shlex

import pandas as pd
import pytest
import yaml

from residency.core import config as residency_config
from residency.campaigns import tasks
from residency.claims import c5, c6, c11, record

from conftest import ROOT, snakemake, tiny_workdir

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


def test_the_oracle_is_resident_and_every_other_cell_runs_under_the_candidates_limit():
    cfg = _config()
    assert tasks.cells_of(cfg) == ["oracle", "control-kernel-mmap", "control-pager-lru", "candidate"]
    gen = {c: shlex.join(tasks.generate_args(cfg, c, "m.gguf", 123)) for c in tasks.cells_of(cfg)}
    har = {c: shlex.join(tasks.harness_args(cfg, c, 123, "o.json", 1000, "t00")) for c in tasks.cells_of(cfg)}
    assert "--arm kernel-mmap" in gen["oracle"] and "--budget-bytes" not in gen["oracle"] + har["oracle"]
    assert "--meta role=oracle" in har["oracle"] and "--meta r=" not in har["oracle"]
    # A (kernel-mmap) takes no pager budget: the host limit is its cap; the pager arms get r * T_repr.
    assert "--arm kernel-mmap" in gen["control-kernel-mmap"] and "--budget-bytes" not in gen["control-kernel-mmap"]
    assert "--arm pager-lru" in gen["control-pager-lru"] and "--budget-bytes 123" in gen["control-pager-lru"]
    assert f"--arm {cfg['tasks']['arm']}" in gen["candidate"] and "--budget-bytes 123" in gen["candidate"]
    for cell in ("control-kernel-mmap", "control-pager-lru", "candidate"):  # one limit r * T_repr + O for all three
        assert har[cell].startswith("--budget-bytes 123 --overhead o.json ") and "--meta r=0.5" in har[cell], cell
        assert f"--tokens {cfg['tasks']['tokens']}" in gen[cell] and f"--ctx {cfg['tasks']['ctx']}" in gen[cell]
    assert "--meta role=control" in har["control-pager-lru"] and "--meta control_index=1" in har["control-pager-lru"]
    assert "--meta control_index=0" in har["control-kernel-mmap"] and "control_index" not in har["candidate"]
    assert "--meta config_digest=" + tasks.tasks_digest(cfg) in har["candidate"]


def test_runs_and_digest_follow_the_tasks_section():
    cfg = _config()
    runs = tasks.task_runs(cfg)
    assert len(runs) == 4 * cfg["tasks"]["n"] and runs[0] == "results/runs/tasks/t00/oracle/harness.json"
    assert runs[3] == "results/runs/tasks/t00/candidate/harness.json"
    other = copy.deepcopy(cfg)
    other["tasks"]["seed"] += 1
    assert tasks.tasks_digest(other) != tasks.tasks_digest(cfg)
    other = copy.deepcopy(cfg)
    other["tasks"]["controls"] = ["pager-lru"]
    assert tasks.tasks_digest(other) != tasks.tasks_digest(cfg) and len(tasks.task_runs(other)) == 3 * cfg["tasks"]["n"]


@pytest.mark.parametrize("change, needle", [
    (lambda c: c["tasks"].pop("seed"), "seed"),
    (lambda c: c["tasks"].update(extra=1), "extra"),
    (lambda c: c["tasks"].update(arm="kernel-mmap"), "arm"),
    (lambda c: c["tasks"].update(controls=[]), "tasks.controls"),
    (lambda c: c["tasks"].update(controls=["pager-lru", "pager-lru"]), "tasks.controls"),
    (lambda c: c["claims"].pop("c11_f1_threshold"), "c11_f1_threshold"),
])
def test_the_schema_checks_the_tasks_section(change, needle):
    cfg = _config()
    change(cfg)
    with pytest.raises(residency_config.ConfigError, match=needle):
        residency_config.validate(cfg)


# ---- the premise: controls nonresident under the candidate's own cap ------------------------------


def test_the_default_and_paper_tasks_keep_the_premise():
    assert tasks.premise_error(_config()) is None
    assert tasks.premise_error(yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())) is None


@pytest.mark.parametrize("change, needle", [
    # the resident path is the oracle, never C5's (or C6's) control
    (lambda t: t.update(controls=["resident", "pager-lru"]), "tasks.controls[0]: 'resident' is the resident path"),
    (lambda t: t.update(controls=["kernel-mmap", "oracle"]), "tasks.controls[1]: 'oracle' is the resident path"),
    # r = 1: the cap holds every weight, so kernel-mmap under it is resident
    (lambda t: t.update(ratio=1.0), "tasks.ratio: 1.0 makes the hard limit r x T_repr + O hold every weight"),
    (lambda t: t.update(controls=["kernel-mmap", "pager-declared"]), "tasks.controls[1]: 'pager-declared' is the "
                                                                      "candidate's arm"),
    (lambda t: t.update(controls=["pager-lru-k"]), "tasks.controls[0]: 'pager-lru-k' is not one of the control arms"),
])
def test_a_control_that_is_not_nonresident_under_the_cap_is_refused_in_one_line(change, needle):
    cfg = _config()
    change(cfg["tasks"])
    residency_config.validate(cfg)  # the schema admits it: the premise check is what refuses
    msg = tasks.premise_error(cfg)
    assert msg is not None and msg.startswith("config error: ") and "\n" not in msg
    assert needle in msg, msg


def test_snakemake_refuses_a_resident_control_before_any_cell_runs(tmp_path):
    work = tiny_workdir(tmp_path)
    cfg = yaml.safe_load((work / "config" / "config.yaml").read_text())
    cfg["tasks"]["controls"] = ["resident"]
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    p = snakemake(work, "-n", "claims/C5.json", timeout=300)
    errors = [line for line in p.stderr.splitlines() if line.strip() and not line.startswith("Using workflow")]
    assert p.returncode != 0 and errors == [tasks.premise_error(cfg)], p.stderr[-2000:]
    assert not (work / "results").exists()


# ---- the claims on fixture tables ----------------------------------------------------------------

CELLS = (("oracle", "kernel-mmap", None), ("control", "kernel-mmap", 0), ("control", "pager-lru", 1),
         ("candidate", "pager-declared", None))


def _row(task, role, arm, index, f1, *, status="ok", wall=1.0, grade="hard", peak=90, limit=100, events=0, oom=0,
         exact=True):
    oracle = role == "oracle"
    ok = None if oracle or grade != "hard" else (peak < limit and events == 0 and oom == 0)  # the recorded predicate
    return {"task": task, "kind": "place", "role": role, "arm": arm, "control_index": index,
            "r": None if oracle else 0.5, "status": status, "error": None if status == "ok" else "boom",
            "reference": "Porto", "answer": "Porto" if f1 == 1.0 else "Lyon", "f1": f1 if status == "ok" else None,
            "tokens_equal_oracle": None if oracle else exact, "logits_equal_oracle": None if oracle else exact,
            "wall_s": wall, "host_grade": "instrumented" if oracle else grade, "limit_bytes": None if oracle else limit,
            "peak_bytes": peak, "limit_events": None if oracle else events, "oom_kills": None if oracle else oom,
            "admissible": ok}


def _table(ctrl, cand, *, walls=None, exact=None, status=None, **kw):
    """Per task: the oracle and both controls score `ctrl`, the candidate `cand`. walls[cell]
    and exact[cell] (cell = role or control arm) give every task of that cell a wall time or
    an exactness outcome; defaults: controls 2.0 s (A) and 3.0 s (C), the candidate 1.0 s."""
    walls = {"oracle": 0.5, "kernel-mmap": 2.0, "pager-lru": 3.0, "candidate": 1.0, **(walls or {})}
    exact, status = exact or {}, status or {}
    rows = []
    for i, (a, b) in enumerate(zip(ctrl, cand)):
        for role, arm, index in CELLS:
            key = arm if role == "control" else role
            wall = walls[key][i] if isinstance(walls[key], list) else walls[key]
            extra = kw if role == "candidate" else {}
            rows.append(_row(f"t{i:02d}", role, arm, index, b if role == "candidate" else a, wall=wall,
                             exact=exact.get(key, True), status=status.get(key, "ok"), **extra))
    return {"tasks": pd.DataFrame(rows)}


def _verdict(mod, frames, settings=SETTINGS):
    res = mod.compute(frames, settings)
    doc = {"values": record.plain(res.values), "assertions": [a.as_dict() for a in res.assertions]}
    return record.verdict_of(doc, res.insufficient), doc["values"]


def test_c5_passes_with_equal_f1_and_every_task_direction_favourable():
    (verdict, reasons), v = _verdict(c5, _table([1.0, 0.0], [1.0, 0.0]))
    assert verdict == "pass", reasons
    assert v["control_arm"] == "kernel-mmap" and v["aggregate_f1_delta"] == 0.0  # the established control
    assert v["cycle"]["total_control_wall_s"] == 4.0 and v["cycle"]["total_candidate_over_control"] == 0.5
    assert v["cycle"]["favourable_against_a_nonresident_control"] == [True, True]
    assert c5.REVISION["revision"].startswith("C5 r1") and "6 GiB" in c5.REVISION["follows"]


def test_c5_fails_when_one_task_direction_is_unfavourable():
    (verdict, reasons), v = _verdict(c5, _table([1.0, 0.0], [1.0, 0.0], walls={"candidate": [1.0, 2.5]}))
    assert verdict == "fail" and v["cycle"]["total_candidate_over_control"] < 1  # the total alone would pass
    assert any("favourable_against_a_nonresident_control" in r for r in reasons), reasons


def test_c5_fails_on_unequal_f1_and_a_tolerance_set_before_the_runs_can_admit_it():
    (verdict, reasons), _ = _verdict(c5, _table([1.0, 0.0], [1.0, 0.5]))
    assert verdict == "fail" and any("abs_aggregate_f1_delta" in r for r in reasons)
    (verdict, reasons), _ = _verdict(c5, _table([1.0, 0.0], [1.0, 0.5]), dict(SETTINGS, c5_f1_tolerance=0.3))
    assert verdict == "fail" and any("task_f1_equal" in r for r in reasons)  # task-level F1 still differs


def test_c5_an_unfinished_run_is_insufficient_evidence():
    (verdict, reasons), _ = _verdict(c5, _table([1.0], [1.0], status={"kernel-mmap": "oom-killed"}))
    assert verdict == "insufficient-evidence" and any("control kernel-mmap: status oom-killed" in r for r in reasons)


def test_c5_needs_its_control_under_the_candidates_hard_limit():
    frames = _table([1.0, 0.0], [1.0, 0.0])
    t = frames["tasks"]
    t.loc[(t["arm"] == "kernel-mmap") & (t["role"] == "control"), "limit_bytes"] = None  # ran with no limit
    (verdict, reasons), _ = _verdict(c5, frames)
    assert verdict == "insufficient-evidence" and any("one hard limit" in r for r in reasons), reasons
    (verdict, reasons), _ = _verdict(c5, _table([1.0], [1.0], grade="unenforced"))
    assert verdict == "insufficient-evidence" and any("need a hard host limit" in r for r in reasons), reasons


def test_c6_picks_the_fastest_exact_control_and_meets_the_zero_margin():
    (verdict, reasons), v = _verdict(c6, _table([1.0, 0.5], [1.0, 0.5]))
    assert verdict == "pass", reasons
    assert v["control_arm"] == "kernel-mmap" and v["cycle"]["total_control_wall_s"] == 4.0
    assert v["cycle"]["shorter_against_a_nonresident_control"] is True and v["valid_cells"] == 4
    # A faster but not exact: the rule passes over it to the fastest exact control, C.
    (verdict, reasons), v = _verdict(c6, _table([1.0, 0.5], [1.0, 0.5], walls={"kernel-mmap": 0.9},
                                                exact={"kernel-mmap": False}))
    assert v["control_arm"] == "pager-lru" and v["controls"]["kernel-mmap"]["exact_all"] is False
    assert verdict == "pass" and v["cycle"]["total_control_wall_s"] == 6.0
    # C faster than A: C is the control, and a candidate slower than it fails the cycle half.
    (verdict, reasons), v = _verdict(c6, _table([1.0, 0.5], [1.0, 0.5], walls={"pager-lru": 0.8}))
    assert v["control_arm"] == "pager-lru" and verdict == "fail"
    assert any("shorter_against_a_nonresident_control" in r for r in reasons), reasons


def test_c6_zero_margin_missed_and_no_exact_control():
    (verdict, reasons), v = _verdict(c6, _table([1.0, 0.5], [1.0, 0.4]))
    assert verdict == "fail" and v["aggregate_f1_delta"] == pytest.approx(-0.05)
    assert any("zero-margin" in r for r in reasons)
    (verdict, reasons), v = _verdict(c6, _table([1.0], [1.0], exact={"kernel-mmap": False, "pager-lru": None}))
    assert verdict == "insufficient-evidence" and v["control_arm"] is None
    assert any("no control satisfies the exactness contract" in r for r in reasons), reasons


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
