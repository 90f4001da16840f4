"""Claim C1 from a certificate: pass when every obligation holds on an audited board; fail
when one exactness term, the class predicate, admission, the GPU audit or lifecycle closure
fails; insufficient-evidence (never pass) when an obligation cannot be evaluated, and when
there is no board, so the reference's GPU half is not shown."""

import json

import pytest

from residency.evidence import certificate
from residency import claims
from residency.core import manifest
from residency.claims import verify
from residency.gather.certificate import gather_certificate
from test_certificate import _edit, certified_run
from fixtures import source_file
from test_inventory import SHA

SETTINGS = {"approx_tolerance": 0.005}
# A (tiny) audited board: 10 bytes, 8 declared, 8 to spare, no foreign compute process.
AUDITED = {"grade": "audited", "reason": None, "g_decl_bytes": 8, "g_phys_bytes": 10, "margin_bytes": 8,
           "foreign_compute_processes": 0}


def project(tmp_path, edit=None, edit_oracle=None, gpu=AUDITED):
    runs = tmp_path / "results" / "runs" / "certificate"
    r, o = certified_run(runs / "certified", cap=800, peak=600, gpu=gpu), certified_run(runs / "oracle", cap=None)
    if edit:
        edit(r)
    if edit_oracle:
        edit_oracle(o)
    manifest.write(r), manifest.write(o)
    res = tmp_path / "results"
    ident = res / "model.json"
    ident.write_text(json.dumps({"path": source_file(tmp_path, "m.gguf"), "sha256": SHA, "bytes": 2400}))
    certificate.write(certificate.build(r, o, json.loads(ident.read_text()), 100), runs / certificate.FILE)
    gather_certificate(str(r), str(o), str(ident), 100, str(res / "certificate.parquet"), str(runs / certificate.FILE))
    (res / "machine.json").write_text(json.dumps({"hostname": "test"}))
    (res / "probe.json").write_text(json.dumps({"cgroup": {"version": 1}}))
    return tmp_path


def test_a_certified_execution_passes_and_verifies(tmp_path):
    root = project(tmp_path)
    doc = claims.make("C1", root, SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    assert doc["values"]["claim_class"] == "W" and doc["values"]["equations"]["eq3"]["margin_bytes"] == 20
    assert doc["values"]["authority"]["gpu"] == "audited" and doc["values"]["gpu_audited"] is True
    assert verify.verify("C1", root) == [] and verify.replay("C1", root) == []


def test_without_a_board_the_gpu_half_is_named_not_shown(tmp_path):
    """No board (grade absent, G = 0, nothing on a device): the certificate's own GPU
    obligation is not applicable, every other obligation holds, and the claim says the
    reference's GPU half is not shown, never pass."""
    root = project(tmp_path, gpu=None)
    doc = claims.make("C1", root, SETTINGS)
    assert doc["verdict"] == "insufficient-evidence", doc["reasons"]
    assert [r.split(" (")[0] for r in doc["reasons"]] == ["unevaluable: /values/gpu_audited: value missing"], \
        doc["reasons"]
    assert doc["values"]["authority"]["gpu"] == "absent" and "not applicable" in doc["values"]["gpu_note"]
    assert doc["values"]["checks"]["gpu_audit"] is True and doc["values"]["equations"]["eq3"]["margin_bytes"] == 30
    assert verify.verify("C1", root) == [] and verify.replay("C1", root) == []


@pytest.mark.parametrize("edit, failing", [
    (lambda r: (r / "response.txt").write_text("abd"), "/values/checks/response_exact"),
    (lambda r: _edit(r / "run.json", lambda d: d["destination"]["host"].update(memory="file-mapping")),
     "/values/checks/destination_exact"),
    (lambda r: _edit(r / "harness.json", lambda d: d["host"].update(limit_bytes=2400)), "/values/w_or_r"),
    (lambda r: _edit(r / "harness.json", lambda d: d["host"]["cgroup"].update(oom_kills=1)),
     "/values/checks/candidate_resource_contract"),
    (lambda r: _edit(r / "run.json", lambda d: d["plan"].update(shutdown="failed")), "/values/checks/lifecycle_closed"),
    (lambda r: _edit(r / "harness.json", lambda d: d["gpu"].update(foreign_compute_processes=1)),
     "/values/checks/gpu_audit"),
])
def test_each_obligation_failing_fails_the_claim(tmp_path, edit, failing):
    doc = claims.make("C1", project(tmp_path, edit), SETTINGS)
    assert doc["verdict"] == "fail" and any(failing in r for r in doc["reasons"]), doc["reasons"]


def test_an_oracle_that_did_not_close_fails_the_claim(tmp_path):
    doc = claims.make("C1", project(tmp_path, edit_oracle=lambda o: _edit(
        o / "run.json", lambda d: d["counters"].update(reconcile_mismatches=1))), SETTINGS)
    assert doc["verdict"] == "fail" and any("oracle_lifecycle_closed" in r for r in doc["reasons"]), doc["reasons"]


def test_an_unevaluable_obligation_is_insufficient_evidence(tmp_path):
    def no_nvml(r):
        _edit(r / "harness.json", lambda d: d["gpu"].update(grade="failed", reason="GPU is lost"))

    doc = claims.make("C1", project(tmp_path, no_nvml), SETTINGS)
    assert doc["verdict"] == "insufficient-evidence", doc["reasons"]
    assert any("gpu_audit" in r for r in doc["reasons"])


def test_a_record_that_is_not_what_the_runs_give_is_refused(tmp_path):
    root = project(tmp_path)
    runs = root / "results" / "runs" / "certificate"
    (runs / "certificate.json").write_text("{}\n")
    with pytest.raises(ValueError, match="not the record its run directories give"):
        gather_certificate(str(runs / "certified"), str(runs / "oracle"), str(root / "results" / "model.json"), 100,
                           str(tmp_path / "t.parquet"), str(runs / "certificate.json"))


def test_deep_verify_rebuilds_the_certificate_from_the_runs(tmp_path):
    root = project(tmp_path)
    claims.make("C1", root, SETTINGS, root / "claims" / "C1.json")
    assert verify.verify("C1", root, deep=True) == []
    routes = root / "results" / "runs" / "certificate" / "oracle" / "routes.jsonl"
    routes.write_text(routes.read_text().replace("[2, 3]", "[3, 2]"))
    found = verify.verify("C1", root, deep=True)
    assert found and any("routes.jsonl" in p for p in found), found
