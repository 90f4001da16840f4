"""The certificate of real residctl runs on the default synthetic MoE at the configured
sizes: every obligation holds at H_cap; the same run under a cap above U_sem^LB is not
class W; a route read at a node the graph lacks stops the run naming the node."""

import json
import subprocess

import pytest
import yaml

from residency import cells, certificate, gguf_synth, harness
from residency.identity import sha256_file
from conftest import ROOT

RESIDCTL = ROOT / ".build" / "engine-test" / "residctl"
pytestmark = pytest.mark.skipif(not RESIDCTL.exists(), reason=f"{RESIDCTL} not built (see README: Tests)")
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
CERT = CONFIG["certificate"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("moe") / "synthetic-moe.gguf"
    gguf_synth.write(gguf_synth.spec_from_config(CONFIG["models"]["synthetic"], "moe"), out)
    return {"path": str(out), "sha256": sha256_file(out), "bytes": out.stat().st_size}


def generate(model, cell, out, extra=()):
    args = cells.cert_generate_args(CONFIG, cell, model["path"]).split() + list(extra)
    return [str(RESIDCTL), "generate", *args, "--prompt", CONFIG["pager_model"]["prompt"], "--out", str(out)]


@pytest.fixture(scope="module")
def oracle(model, tmp_path_factory):
    d = tmp_path_factory.mktemp("oracle") / "run"
    rec = harness.run(generate(model, "oracle", d), d, limit_bytes=None)
    assert rec["status"] == "ok", rec["stderr_tail"]
    return d


def certify(model, oracle, d, cap):
    rec = harness.run(generate(model, "certified", d), d, limit_bytes=cap)
    assert rec["status"] == "ok", rec["stderr_tail"]
    return certificate.build(d, oracle, model, CERT["reserve_bytes"])


def test_the_configured_certified_run_meets_every_obligation(model, oracle, tmp_path):
    c = certify(model, oracle, tmp_path / "run", CERT["host_cap_bytes"])
    if c["A"]["host"] != "hard":
        pytest.skip(f"no hard host cap here ({c['A']['host_reason']}): the predicates cannot be judged")
    assert all(v is True for v in c["checks"].values()), (c["checks"], c["E"]["terms"])
    assert c["I"]["u_sem_lb"]["union"]["overlapping_component_intervals"] == 0
    assert c["I"]["u_sem_lb"]["u_sem_lb_bytes"] <= c["I"]["t_repr"]["t_repr_bytes"] == c["I"]["engine_tensor_bytes"]


def test_a_cap_above_the_demand_is_not_class_w(model, oracle, tmp_path):
    c = certify(model, oracle, tmp_path / "run", 2 * model["bytes"])
    if c["A"]["host"] != "hard":
        pytest.skip("no hard host cap here")
    assert c["checks"]["eq3_holds"] is False and c["predicates"]["equations"][2]["margin_bytes"] < 0
    assert c["checks"]["all_routes_exact"] and c["checks"]["lifecycle_closed"]


def test_a_route_read_without_its_node_stops_naming_it(model, tmp_path):
    p = subprocess.run(generate(model, "certified", tmp_path / "run", ["--route-node", "no_such_node"]),
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "no_such_node-0" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
