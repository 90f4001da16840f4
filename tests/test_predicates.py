"""Equations 1-3: both sides, margins, and what leaves an equation unevaluated."""

from residency.evidence import predicates

MiB = 1 << 20
HARD = {"grade": "hard", "limit_bytes": 64 * MiB, "mem_total_bytes": 8 << 30}
ABSENT = {"grade": "absent", "g_decl_bytes": 0, "g_phys_bytes": 0}
AUDITED = {"grade": "audited", "g_decl_bytes": 8 * MiB, "g_phys_bytes": 24 * MiB}


def eqs(*args, **kw):
    return {e["equation"]: e for e in predicates.evaluate(*args, **kw)["equations"]}


def test_margins_are_lhs_minus_rhs_and_hold_when_positive():
    e = eqs(100 * MiB, 100 * MiB, 90 * MiB, 16 * MiB, HARD, AUDITED)
    assert (e[1]["rhs_bytes"], e[1]["margin_bytes"], e[1]["holds"]) == (48 * MiB, 52 * MiB, True)
    assert (e[2]["rhs_bytes"], e[2]["margin_bytes"], e[2]["holds"]) == (72 * MiB, 28 * MiB, True)
    assert (e[3]["rhs_bytes"], e[3]["margin_bytes"], e[3]["holds"]) == (88 * MiB, 2 * MiB, True)
    assert e[3]["statement"] == "U_sem^LB > H_cap + G_phys"


def test_each_equation_can_fail_alone():
    e = eqs(40 * MiB, 100 * MiB, 90 * MiB, 16 * MiB, HARD, AUDITED)   # S below H_cap - R_policy
    assert [e[n]["holds"] for n in (1, 2, 3)] == [False, True, True]
    e = eqs(100 * MiB, 72 * MiB, 90 * MiB, 16 * MiB, HARD, AUDITED)   # equal is not greater
    assert [e[n]["holds"] for n in (1, 2, 3)] == [True, False, True] and e[2]["margin_bytes"] == 0
    e = eqs(100 * MiB, 100 * MiB, 80 * MiB, 16 * MiB, HARD, AUDITED)  # demand fits host + board
    assert [e[n]["holds"] for n in (1, 2, 3)] == [True, True, False] and e[3]["margin_bytes"] == -8 * MiB


def test_absent_gpu_is_g_zero_evidence():
    e = eqs(100 * MiB, 100 * MiB, 65 * MiB, 0, HARD, ABSENT)
    assert e[2]["rhs_bytes"] == e[3]["rhs_bytes"] == 64 * MiB and e[3]["margin_bytes"] == MiB and e[3]["holds"]


def test_no_hard_cap_or_failed_gpu_leaves_equations_unevaluated_never_held():
    e = eqs(100 * MiB, 100 * MiB, 90 * MiB, 0, {"grade": "unenforced", "limit_bytes": 64 * MiB}, ABSENT)
    assert all(e[n]["holds"] is None and "no enforced host cap" in e[n]["not_evaluable"] for n in (1, 2, 3))
    e = eqs(100 * MiB, 100 * MiB, 90 * MiB, 0, HARD, {"grade": "failed", "reason": "GPU is lost"})
    assert e[1]["holds"] is True and e[2]["holds"] is None and e[3]["holds"] is None
    assert "G_decl unknown" in e[2]["not_evaluable"] and "G_phys unknown" in e[3]["not_evaluable"]
    e = eqs(100 * MiB, 100 * MiB, 90 * MiB, None, HARD, ABSENT)
    assert e[1]["holds"] is None and "R_policy" in e[1]["not_evaluable"]


def test_visible_capacity_observation():
    v = predicates.evaluate(100, 100, 90, 0, HARD, AUDITED)["visible_capacity"]
    assert v["rhs_bytes"] == (8 << 30) + 24 * MiB and v["margin_bytes"] == 90 - (8 << 30) - 24 * MiB
