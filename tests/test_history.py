"""The claim history and the protocol: every computation appends one line, the ledger
counts them per scope with the verdicts seen, appends are whole lines even from many
processes at once, a corrupt line is a clear error, and the campaign design is recorded."""

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given, settings, strategies as st

from residency import claims
from residency.gather import pager as gather
from residency.claims import history, protocol, verify
from residency.core.identity import digest, sha256_file

from conftest import ROOT
from fixtures import seal
from test_claims import SETTINGS, project

HEX = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


def entry(verdict="pass", scope="a" * 64, n=0):
    return {"time": f"2026-01-01T00:00:{n:02d}+00:00", "id": "P1", "verdict": verdict, "record_sha256": "b" * 64,
            "scope_sha256": scope, "settings_sha256": "c" * 64, "protocol_sha256": "d" * 64}


def test_each_computation_appends_one_line(tmp_path):
    root = project(tmp_path)
    doc = claims.make("P1", root, SETTINGS)
    claims.make("P1", root, SETTINGS)
    lines = history.read(root / "claims" / "history" / "P1.jsonl")
    assert len(lines) == 2
    rec = root / "claims" / "P1.json"
    for e in lines:
        assert e["id"] == "P1" and e["verdict"] == doc["verdict"]
        assert e["record_sha256"] == sha256_file(rec)
        assert e["scope_sha256"] == digest(doc["scope"]) and e["settings_sha256"] == digest(SETTINGS)
        assert e["time"].endswith("+00:00")
    assert lines[0]["time"] <= lines[1]["time"]


def test_ledger_counts_computations_and_verdicts_on_the_scope(tmp_path):
    root = project(tmp_path)
    claims.make("P1", root, SETTINGS)
    # The same scope (engine, config, model, machine), other measurements: P1 now fails.
    res = root / "results"
    dirs = pq.read_table(res / "pager_synthetic.parquet").column("run_dir").to_pylist()
    for d in map(Path, dirs):
        if "pager-lru" in d.parts:
            run = json.loads((d / "run.json").read_text())
            run["counters"]["physical_bytes_read"] //= 2
            (d / "run.json").write_text(json.dumps(run))
            seal(d)
    gather.gather_pager_synthetic(dirs, root / "region.json", res / "pager_synthetic.parquet")
    assert claims.make("P1", root, SETTINGS)["verdict"] == "fail"
    led = claims.ledger([root / "claims" / "P1.json"], root / "claims" / "ledger.json")
    e = led["claims"][0]
    assert e["computed_on_scope"] == 2 and e["verdicts_on_scope"] == {"fail": 1, "pass": 1}
    assert e["computed_in_all"] == 2 and e["in_history"] is True
    # Another machine is another scope: counted in all, not on this scope.
    (res / "machine.json").write_text(json.dumps({"hostname": "other"}))
    claims.make("P1", root, SETTINGS)
    e = claims.ledger([root / "claims" / "P1.json"], root / "claims" / "ledger.json")["claims"][0]
    assert e["computed_on_scope"] == 1 and e["verdicts_on_scope"] == {"fail": 1} and e["computed_in_all"] == 3
    assert verify.ledger_problems(root) == [f"{claims.LEDGER_FILE} does not list {c}"
                                            for c in sorted(set(claims.REGISTRY) - {"P1"})]


def test_claim_cli_says_when_the_scope_saw_other_verdicts(tmp_path):
    root = project(tmp_path)
    cmd = [sys.executable, "-m", "residency.cli", "claim", "P1", "--root", str(root),
           "--settings", json.dumps(SETTINGS), "--protocol", "{}"]
    assert subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT).returncode == 0
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and "computed 2 times on this scope; verdicts seen: {'pass': 2}" in p.stderr


@pytest.mark.parametrize("text, line, why", [
    ("{not json}\n", 1, "corrupt history line (Expecting property name"),
    (json.dumps({"time": "t"}) + "\n", 1, "corrupt history line (needs time, id, verdict"),
    (json.dumps({**entry(), "verdict": "maybe"}) + "\n", 1, "corrupt history line (verdict 'maybe')"),
    (json.dumps({**entry(), "scope_sha256": "xyz"}) + "\n", 1, "corrupt history line (scope_sha256 is not a sha256)"),
    (json.dumps(entry()) + "\n" + json.dumps(entry())[:30], 2, "corrupt history line (torn: no end of line)"),
])
def test_a_corrupt_line_is_a_clear_error(tmp_path, text, line, why):
    p = tmp_path / "P1.jsonl"
    p.write_text(text)
    with pytest.raises(history.HistoryError) as exc:
        history.read(p)
    assert str(exc.value).startswith(f"{p}:{line}: {why}")


def test_a_corrupt_history_stops_the_ledger_with_one_line(tmp_path):
    root = project(tmp_path)
    claims.make("P1", root, SETTINGS)
    before = (root / "claims" / "ledger.json").read_bytes()  # the claim's own refresh of its entry
    with open(root / "claims" / "history" / "P1.jsonl", "a") as fh:
        fh.write("garbage\n")
    p = subprocess.run([sys.executable, "-m", "residency.cli", "ledger", "--out", str(root / "claims" / "ledger.json"),
                        str(root / "claims" / "P1.json")], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith(f"residency: error: {root}/claims/history/P1.jsonl:2: corrupt history line")
    assert (root / "claims" / "ledger.json").read_bytes() == before  # nothing half-written
    assert verify.verify("P1", root)[0].startswith(f"{root}/claims/history/P1.jsonl:2: corrupt history line")


def _append_many(args):
    path, worker, n = args
    for i in range(n):
        history.append(path, {**entry(n=i % 60), "id": f"P{worker}", "record_sha256": f"{worker:064x}"})


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "history" / "P1.jsonl"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_append_many, [(path, w, 200) for w in range(4)])
    lines = history.read(path)
    assert len(lines) == 800
    assert sorted({e["id"] for e in lines}) == ["P0", "P1", "P2", "P3"]
    assert all(e["record_sha256"] == f"{int(e['id'][1:]):064x}" for e in lines)


@settings(max_examples=50, deadline=None)
@given(verdicts=st.lists(st.sampled_from(history.VERDICTS), min_size=1, max_size=12), scopes=st.lists(HEX, min_size=1, max_size=3),
       pick=st.lists(st.integers(min_value=0, max_value=2), min_size=12, max_size=12))
def test_appended_lines_read_back_and_tally(tmp_path_factory, verdicts, scopes, pick):
    path = tmp_path_factory.mktemp("h") / "P1.jsonl"
    written = [entry(v, scopes[pick[i] % len(scopes)], i) for i, v in enumerate(verdicts)]
    for e in written:
        history.append(path, e)
    assert history.read(path) == written
    t = history.tally(written, scopes[0])
    mine = [e["verdict"] for e in written if e["scope_sha256"] == scopes[0]]
    assert t["computed_on_scope"] == len(mine) and t["computed_in_all"] == len(written)
    assert t["verdicts_on_scope"] == {v: mine.count(v) for v in sorted(set(mine))}


# ---- the protocol: the campaign design, recorded ---------------------------------------------

CONFIG = {"harness": {"overhead_reps": 3}, "pager_synthetic": {"main": {"reps": 3}}, "pager_model": {"reps": 3},
          "matched_source": {"pairs": ["D-F", "F-D"]}, "claims": {"x": 1}, "llama": {"commit": "c"}}


@pytest.mark.parametrize("inputs, sections", [
    (["results/pager_synthetic_opt.parquet", "results/machine.json"], ["pager_synthetic"]),
    (["results/pager_model.parquet", "results/pager_model_opt.parquet"], ["pager_model"]),
    (["results/matched_source.parquet"], ["matched_source", "pager_model"]),
])
def test_protocol_takes_the_campaigns_the_inputs_come_from(inputs, sections):
    doc = protocol.of(CONFIG, inputs)
    assert sorted(doc["campaigns"]) == sections and doc["harness"] == {"overhead_reps": 3}
    assert all(doc["campaigns"][s] == CONFIG[s] for s in sections) and "inputs_without_campaign" not in doc


def test_protocol_names_an_input_of_no_campaign():
    assert protocol.of(CONFIG, ["results/mystery.parquet"])["inputs_without_campaign"] == ["results/mystery.parquet"]


def test_the_record_carries_its_protocol_and_replay_keeps_it(tmp_path):
    root = project(tmp_path)
    proto = protocol.of(CONFIG, claims.input_paths("P5"))
    doc = claims.make("P5", root, SETTINGS, protocol=proto)
    assert doc["protocol"]["campaigns"]["pager_synthetic"] == {"main": {"reps": 3}}
    rec = json.loads((root / "claims" / "P5.json").read_text())
    assert rec["protocol"] == proto and rec["settings"] == SETTINGS
    assert history.read(root / "claims" / "history" / "P5.jsonl")[0]["protocol_sha256"] == digest(proto)
    assert verify.replay("P5", root) == []


def test_claim_from_the_config_records_the_config_protocol(tmp_path):
    root = project(tmp_path)
    p = subprocess.run([sys.executable, "-m", "residency.cli", "claim", "P1", "--root", str(root),
                        "--config", str(ROOT / "config" / "config.yaml")], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    doc = json.loads((root / "claims" / "P1.json").read_text())
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert doc["protocol"]["campaigns"] == {"pager_synthetic": cfg["pager_synthetic"]}
    assert doc["settings"] == cfg["claims"]
