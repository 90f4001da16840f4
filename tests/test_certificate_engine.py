"""The certificate of real residctl runs on the default synthetic MoE at the configured
sizes: every obligation holds at H_cap; the same run under a cap above U_sem^LB is not
class W; a route read at a node the graph lacks stops the run naming the node."""

import json
import subprocess

import pytest
import yaml

from residency.campaigns import cells
from residency.evidence import certificate
from residency.inputs import gguf_synth
from residency.run import harness
from residency.core.identity import sha256_file
from conftest import ROOT

RESIDCTL = ROOT / ".build" / "engine-test" / "residctl"
pytestmark = pytest.mark.skipif(not RESIDCTL.exists(), reason=f"[engine] {RESIDCTL} not built (see README: Tests)")
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
CERT = CONFIG["certificate"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("moe") / "synthetic-moe.gguf"
    gguf_synth.write(gguf_synth.spec_from_config(CONFIG["models"]["synthetic"], "moe"), out)
    return {"path": str(out), "sha256": sha256_file(out), "bytes": out.stat().st_size}


def generate(model, cell, out, extra=()):
    args = cells.cert_generate_args(CONFIG, cell, model["path"]) + list(extra)
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
        pytest.skip(f"[cgroup] no hard host cap here ({c['A']['host_reason']}): the predicates cannot be judged")
    assert all(v is True for v in c["checks"].values()), (c["checks"], c["E"]["terms"])
    assert c["I"]["u_sem_lb"]["union"]["overlapping_component_intervals"] == 0
    assert c["I"]["u_sem_lb"]["u_sem_lb_bytes"] <= c["I"]["t_repr"]["t_repr_bytes"] == c["I"]["engine_tensor_bytes"]


def test_a_cap_above_the_demand_is_not_class_w(model, oracle, tmp_path):
    c = certify(model, oracle, tmp_path / "run", 2 * model["bytes"])
    if c["A"]["host"] != "hard":
        pytest.skip("[cgroup] no hard host cap here")
    assert c["checks"]["eq3_holds"] is False and c["predicates"]["equations"][2]["margin_bytes"] < 0
    assert c["checks"]["all_routes_exact"] and c["checks"]["lifecycle_closed"]


def test_a_route_read_without_its_node_stops_naming_it(model, tmp_path):
    p = subprocess.run(generate(model, "certified", tmp_path / "run", ["--route-node", "no_such_node"]),
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "no_such_node-0" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_dense_user_model_is_certified_too(tmp_path):
    """certificate.model may name a user GGUF of any family: a dense qwen2 model's U_sem^LB is
    the tensors its graph read (every layer whole, the embedding's looked-up rows), E holds."""
    out = tmp_path / "mine.gguf"
    gguf_synth.write(gguf_synth.make_spec(variant="dense", arch="qwen2", seed=5, n_layer=6, n_embd=512, n_ff=1408,
                                          n_head=8, n_head_kv=4, n_vocab=512, n_ctx=512), out)
    mine = {"path": str(out), "sha256": sha256_file(out), "bytes": out.stat().st_size}
    o = tmp_path / "oracle"
    assert harness.run(generate(mine, "oracle", o), o, limit_bytes=None)["status"] == "ok"
    c = certify(mine, o, tmp_path / "run", None)
    assert c["E"]["exact"] and c["checks"]["all_routes_exact"] and c["checks"]["lifecycle_closed"], c["E"]["terms"]
    u, t = c["I"]["u_sem_lb"]["u_sem_lb_bytes"], c["I"]["t_repr"]["t_repr_bytes"]
    assert 0.5 * t < u < t, (u, t)  # the embedding's unread rows are not demand
    assert c["checks"]["eq3_holds"] is None  # no host cap on this run: never held
