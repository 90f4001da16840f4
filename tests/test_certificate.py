"""The certificate record C = (I, B, A, E, L) of a hand-made certified MoE run: every
obligation evaluated, and each failing alone (exactness term, predicate, lifecycle, GPU)."""

import json

import pytest

from residency.evidence import certificate
from test_exactness_relation import full_run
from test_inventory import EXPERTS, SHA, TENSORS, moe_run
from fixtures import write_trace

MiB = 1 << 20
OBJECTS = [{"name": "embd", "tensors": [TENSORS[0]]},
           {"name": "layer.0", "tensors": [TENSORS[1], TENSORS[2], TENSORS[3], TENSORS[4]]},
           {"name": "output", "tensors": [TENSORS[0]]}]  # tied: counted once
PLAN = {"balanced": True, "tickets": {"balanced": True}, "consumers": {"balanced": True}, "shutdown": "ok",
        "reconcile_violations": 0, "slots": 4, "slots_vacant_at_close": 4, "windows": 1, "windows_free_at_close": 1}
AUDIT = {"sequence_errors": 0, "out_of_order": 0, "foreign_reads": 0, "outside_reads": 0, "objects_out_of_order": 0,
         "route_violations": 0, "moe_steps_unrouted": 0}


def certified_run(d, cap=2000, peak=1500, gpu=None):
    full_run(d)
    moe_run(d)
    (d / "objects.json").write_text(json.dumps({"objects": OBJECTS, "experts": EXPERTS, "n_expert": 4}))
    write_trace(d / "trace.bin", 256, 10, [(0, c, 2, 0) for c in range(10)])
    run = json.loads((d / "run.json").read_text())
    run.update(status="ok", fault=None, identity={"engine_sha256": "e1"}, region={"bytes": 2400}, plan=PLAN,
               signal_audit=AUDIT, source_stats={"logical_bytes": 2560, "physical_bytes": 2560, "padding_bytes": 0},
               counters={"reconcile_checks": 9, "reconcile_mismatches": 0, "content_mismatches": 0,
                         "unrecorded_demand_fills": 0, "stray_demand_fills": 0},
               destination={"host": {"memory": "pager-region"}, "device": {"memory": "none"}})
    (d / "run.json").write_text(json.dumps(run))
    (d / "harness.json").write_text(json.dumps({"status": "ok", "host": {
        "grade": "hard", "limit_bytes": cap, "mem_total_bytes": 1 << 34,
        "cgroup": {"path": "/cg", "peak_bytes": peak, "limit_events": 0, "oom_kills": 0}},
        "gpu": gpu or {"grade": "absent", "reason": "NVML found no GPU", "g_decl_bytes": 0, "g_phys_bytes": 0}}))
    return d


def build(r, o, reserve=100):
    return certificate.build(r, o, {"path": "m.gguf", "sha256": SHA, "bytes": 2400}, reserve)


@pytest.fixture
def good(tmp_path):
    return certified_run(tmp_path / "run", cap=800, peak=600), certified_run(tmp_path / "oracle", cap=None)


def test_a_certified_run_passes_every_check(good):
    c = build(*good)
    assert set(c) >= {"I", "B", "A", "E", "L", "predicates", "checks", "classes", "not_evaluated"}
    assert c["I"]["t_repr"]["t_repr_bytes"] == 400 + 300 + 400 + 200 + 64 and c["I"]["t_repr"]["tensors"] == 5
    assert c["I"]["t_repr"]["union"]["duplicate_component_intervals"] == 1  # the tied output
    assert c["I"]["u_sem_lb"]["u_sem_lb_bytes"] == 830 and c["I"]["u_sched"]["u_sched_bytes"] == 2400
    assert c["A"] == {"host": "hard", "host_reason": None, "gpu": "absent", "gpu_reason": "NVML found no GPU"}
    assert c["B"]["host"]["headroom_bytes"] == 200 and c["E"]["oracle"]["same_build"]
    assert all(v is True for v in c["checks"].values()), c["checks"]
    assert c["classes"]["W"] and c["classes"]["R"] and c["classes"]["L"] and c["classes"]["E"]["exact"]
    assert c["not_evaluated"] == [] and "not applicable" in c["gpu_note"]
    eq3 = c["predicates"]["equations"][2]
    assert (eq3["lhs_bytes"], eq3["rhs_bytes"], eq3["margin_bytes"]) == (830, 800, 30)


def _edit(path, fn):
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("check, edit", [
    ("all_routes_exact", lambda r: (r / "routes.jsonl").write_text((r / "routes.jsonl").read_text().replace("[2, 3]", "[3, 2]"))),
    ("consumer_exact", lambda r: _edit(r / "run.json", lambda d: d["consumer"].update(expert_kernel="ADD_ID"))),
    ("eq3_holds", lambda r: _edit(r / "harness.json", lambda d: d["host"].update(limit_bytes=830))),
    ("lifecycle_closed", lambda r: _edit(r / "run.json", lambda d: d["plan"].update(slots_vacant_at_close=3))),
    ("candidate_resource_contract", lambda r: _edit(r / "harness.json", lambda d: d["host"]["cgroup"].update(limit_events=2))),
    ("candidate_resource_contract", lambda r: _edit(r / "harness.json", lambda d: d["host"]["cgroup"].update(peak_bytes=800))),
    ("oracle_same_build", lambda r: _edit(r / "run.json", lambda d: d["identity"].update(engine_sha256="e2"))),
    ("gpu_audit", lambda r: _edit(r / "harness.json", lambda d: d["gpu"].update(
        grade="audited", g_decl_bytes=MiB, g_phys_bytes=2 * MiB, margin_bytes=MiB, foreign_compute_processes=1))),
])
def test_each_obligation_can_fail(good, check, edit):
    r, o = good
    edit(r)
    c = build(r, o)
    assert c["checks"][check] is False, c["checks"]


def test_unevaluable_obligations_are_named_never_passed(good):
    r, o = good
    _edit(r / "harness.json", lambda d: d["host"].update(grade="unenforced"))
    _edit(r / "harness.json", lambda d: d["gpu"].update(grade="failed", reason="GPU is lost"))
    c = build(r, o)
    assert c["checks"]["eq3_holds"] is None and c["checks"]["gpu_audit"] is None
    assert c["checks"]["candidate_resource_contract"] is None
    assert any("no enforced host cap" in n for n in c["not_evaluated"])
    assert "gpu_audit: not evaluable" in c["not_evaluated"] and "not evaluable" in c["gpu_note"]


def test_write_is_atomic_json(good, tmp_path):
    c = build(*good)
    certificate.write(c, tmp_path / "certificate.json")
    assert json.loads((tmp_path / "certificate.json").read_text())["checks"] == c["checks"]
