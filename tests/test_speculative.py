"""The speculative-decoding campaign (claim C4): the cells' flags and order, the draft's
identity, the gather of fake generate runs into results/speculative.parquet, C4 on it
(insufficient for its GPU half alone when every host assertion holds; fails when one
breaks), and Table 9 from the records."""

import json
import shlex

import pandas as pd
import pytest

from residency import claims
from residency.core import config, lineage
from residency.campaigns import speculative
from residency.gather.studies import table_from
from residency.gather.speculative import gather_speculative
from residency.campaigns.speculative import GREEDY, SPECULATIVE
from residency.render.tables_appendix import authority, table9_populations

from fixtures import make_model_run, seal
from test_config import default

TABLE = ("results", "speculative.parquet")
DRAFT = {"path": "d.gguf", "bytes": 123, "sha256": "d" * 64, "type": "q4_0", "llama_commit": "0c1e",
         "from": {"path": "m.gguf", "sha256": "m" * 64}, "source": "residctl quantize --pure"}


def test_cells_differ_only_in_the_draft_and_run_in_order():
    cfg = default()
    g, s = (shlex.join(speculative.generate_args(cfg, c, "m.gguf", "d.gguf")) for c in speculative.CELLS)
    c = cfg["speculative"]
    assert s == g + f" --draft d.gguf --draft-max {c['draft_max']}"
    assert f"--budget-bytes {c['budget_bytes']}" in g and f"--arm {c['arm']}" in g
    for cell in speculative.CELLS:
        h = shlex.join(speculative.harness_args(cfg, cell))
        assert h.startswith(f"--limit-bytes {c['host_cap_bytes']} ") and f"--meta cell={cell}" in h
    assert speculative.previous_run(GREEDY) == [] and speculative.previous_run(SPECULATIVE) == [speculative.cell_run(GREEDY)]
    gguf, ident = speculative.draft_files(cfg)
    assert gguf == "results/models/drafts/SmolLM2-135M-Instruct.Q4_1.q4_0.gguf" and ident.endswith(".q4_0.json")


def test_digest_follows_the_section_and_the_llama_pin():
    cfg = default()
    d0 = speculative.spec_digest(cfg)
    cfg["llama"]["commit"] = "f" * 40
    d1 = speculative.spec_digest(cfg)
    cfg["speculative"]["draft_max"] += 1
    assert len({d0, d1, speculative.spec_digest(cfg)}) == 3


def test_config_checks_the_section():
    cfg = default()
    cfg["speculative"]["model"] = "user:nope"
    with pytest.raises(config.ConfigError, match="speculative.model"):
        config.validate(cfg)
    cfg = default()
    cfg["speculative"]["draft_type"] = "q2_k"
    with pytest.raises(config.ConfigError):
        config.validate(cfg)


def _cell(root, cell, order, *, phys, traversals, accepted, flip=None, status="ok", limit_events=0):
    tokens = 8
    d = make_model_run(root / "runs", "speculative", "pager-declared", None, order, tokens=tokens, flip=flip,
                       status=status, sealed=False)
    run = json.loads((d / "run.json").read_text())
    run["counters"]["physical_bytes_read"] = phys
    run["generation"].update(decode_wall_ns=2 * 10**9, passes=1 + (traversals if cell == SPECULATIVE else tokens - 1))
    if cell == SPECULATIVE:
        run["speculative"] = {"draft": "d.gguf", "draft_max": 6, "traversals": traversals, "drafted": 30,
                              "accepted": accepted, "full_groups": 1, "rows_traversed": traversals + 30,
                              "decode_outputs": tokens - 1, "outputs_per_traversal": (tokens - 1) / traversals,
                              "draft_ns": 10**8, "draft_load_bytes_read": 0}
    (d / "run.json").write_text(json.dumps(run))
    h = json.loads((d / "harness.json").read_text())
    h["meta"].update({"cell": cell, "order": str(order)})
    h["host"].update(grade="hard", limit_bytes=256 << 20)
    h["host"]["cgroup"]["limit_events"] = limit_events
    (d / "harness.json").write_text(json.dumps(h))
    return seal(d)


def project(tmp_path, *, traversals=3, flip=None, drop=None, status="ok", limit_events=0):
    """A greedy and a speculative cell of 8 outputs; the speculative one in `traversals`."""
    root = tmp_path / "p"
    dirs = [_cell(root, GREEDY, 0, phys=7000, traversals=7, accepted=0)]
    if drop != SPECULATIVE:
        dirs.append(_cell(root, SPECULATIVE, 1, phys=3000, traversals=traversals, accepted=7 - traversals, flip=flip,
                          status=status, limit_events=limit_events))
    res = root / "results"
    res.mkdir(parents=True)
    (res / "machine.json").write_text(json.dumps({"hostname": "test"}))
    (res / "probe.json").write_text(json.dumps({"cgroup": {"version": 1}}))
    ident = root / "draft.json"
    ident.write_text(json.dumps(DRAFT))
    gather_speculative(dirs, str(ident), str(root.joinpath(*TABLE)))
    return root


def test_gather_compares_the_speculative_cell_with_greedy_and_keeps_lineage(tmp_path):
    root = project(tmp_path, flip=9)
    p = root.joinpath(*TABLE)
    t = pd.read_parquet(p)
    assert list(t["cell"]) == [GREEDY, SPECULATIVE]
    assert t["tokens_equal_greedy"].all() and not t["logits_equal_greedy"].any()
    assert set(t["draft_sha256"]) == {"d" * 64} and list(t["traversals"].fillna(-1)) == [-1, 3]
    lin = lineage.of(p)
    assert lin["study"] == "speculative" and lin["identity"] == DRAFT
    assert table_from(lin).to_pandas().equals(t)


def test_c4_holds_on_the_host_and_names_the_gpu_half(tmp_path):
    doc = claims.make("C4", project(tmp_path), {"c4_min_outputs_per_traversal": 1.0})
    assert doc["verdict"] == "insufficient-evidence", doc["reasons"]
    assert [r.split(" (")[0] for r in doc["reasons"]] == ["unevaluable: /values/gpu_served: value missing"]
    v = doc["values"]
    assert v["outputs_per_traversal"] == pytest.approx(7 / 3) and v["greedy_traversals"] == 7
    assert v["exact"] == [True, True] and v["rows_compared"] == 8
    assert v["bytes_per_output_speculative_over_greedy"] == pytest.approx(3 / 7)
    assert v["hybrid_state_rebasing"].startswith("not applicable")


@pytest.mark.parametrize("kw, pointer", [
    ({"flip": 9}, "/values/exact"),
    ({"traversals": 7}, "/values/outputs_per_traversal"),  # one output per traversal: no amortization
    ({"limit_events": 1}, "/values/cells_valid"),
])
def test_c4_fails_when_a_host_assertion_breaks(tmp_path, kw, pointer):
    doc = claims.make("C4", project(tmp_path, **kw), {"c4_min_outputs_per_traversal": 1.0})
    assert doc["verdict"] == "fail"
    assert any(pointer in r for r in doc["reasons"]), doc["reasons"]


@pytest.mark.parametrize("kw, why", [({"drop": SPECULATIVE}, "no single speculative cell"),
                                     ({"status": "failed"}, "did not finish ok")])
def test_c4_is_insufficient_without_both_cells(tmp_path, kw, why):
    doc = claims.make("C4", project(tmp_path, **kw), {"c4_min_outputs_per_traversal": 1.0})
    assert doc["verdict"] == "insufficient-evidence"
    assert any(why in r for r in doc["reasons"]), doc["reasons"]


def test_authority_names_each_grade_with_its_limit_and_the_gpu():
    cells = pd.DataFrame({"host_grade": ["hard", "hard", "instrumented"],
                          "limit_bytes": [256 << 20, 256 << 20, float("nan")]})
    assert authority(cells) == "host hard 256.00 MiB; host instrumented; GPU absent (no device placement)"
    assert authority(cells.assign(gpu_grade="audited")).endswith("GPU audited")


def test_table9_has_one_row_per_record_from_its_own_inputs(tmp_path, monkeypatch):
    root = project(tmp_path)
    monkeypatch.chdir(root)
    claims.make("C4", root, {"c4_min_outputs_per_traversal": 1.0})
    df = table9_populations(["claims/C4.json"], root / "t9")
    assert list(df["record"]) == ["C4"] and df["verdict"][0] == "insufficient-evidence"
    assert df["resource authority"][0].startswith("host hard 256.00 MiB")
    assert "8 tokens and 8 committed logit rows" in df["correctness or utility scope"][0]
    assert (root / "t9.csv").exists() and (root / "t9.tex").exists()


def test_quantize_refuses_a_target_changed_since_its_identity(tmp_path):
    from residency.inputs import models

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    ident = tmp_path / "m.json"
    ident.write_text(json.dumps({"sha256": "0" * 64}))
    with pytest.raises(models.ModelError, match="changed since"):
        models.quantize("/nonexistent/residctl", gguf, ident, "q4_0", tmp_path / "d.gguf", "0c1e")
    assert not (tmp_path / "d.gguf").exists()
