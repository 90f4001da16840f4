"""The full exactness relation E: every term holds for a copy of the oracle, and each term,
made to differ alone, fails alone and names its first differing element."""

import hashlib
import json
import shutil

import numpy as np
import pytest

from residency.evidence import exactness

CONSUMER = {"engine": "residctl", "adapter": "llama", "graph": {"sha256": ["ab", "cd"]},
            "router": {"node": "ffn_moe_topk-N", "n_expert": 4, "n_expert_used": 2}, "expert_kernel": "MUL_MAT_ID"}
DESTINATION = {"host_memory": "pager region", "device_memory": None}


def full_run(d, tokens=(5, 9, 2), seed=3):
    d.mkdir(parents=True)
    logits = np.random.default_rng(seed).standard_normal((len(tokens), 20)).astype("<f4")
    logits.tofile(d / "logits.f32")
    (d / "logits.sha256").write_text("".join(f"{i} {hashlib.sha256(r.tobytes()).hexdigest()}\n"
                                             for i, r in enumerate(logits)))
    (d / "tokens.json").write_text(json.dumps({"prompt": "p", "prompt_tokens": [1], "tokens": list(tokens), "text": "abc"}))
    (d / "response.txt").write_text("abc")
    (d / "routes.jsonl").write_text("".join(json.dumps({"pass": p, "layer": 0, "experts": [[p % 4, 3]]}) + "\n"
                                            for p in range(len(tokens))))
    (d / "run.json").write_text(json.dumps({"consumer": CONSUMER, "destination": DESTINATION}))
    return d


@pytest.fixture
def pair(tmp_path):
    o = full_run(tmp_path / "oracle")
    r = tmp_path / "run"
    shutil.copytree(o, r)
    return r, o


def test_a_copy_of_the_oracle_satisfies_every_term(pair):
    e = exactness.relation(*pair)
    assert e["exact"] and set(e["terms"]) == set(exactness.TERMS)
    assert all(t["equal"] and t["first_difference"] is None and t["predicate"] for t in e["terms"].values())
    assert e["horizon"] == {"outputs": 3, "logit_rows": 3}


def _flip_logit(r):
    raw = bytearray((r / "logits.f32").read_bytes())
    raw[20 * 4 + 8] ^= 1  # row 1, vocab index 2
    (r / "logits.f32").write_bytes(bytes(raw))


def _token(r):
    t = json.loads((r / "tokens.json").read_text())
    t["tokens"][2] = 8
    (r / "tokens.json").write_text(json.dumps(t))


def _route(r):
    lines = (r / "routes.jsonl").read_text().splitlines()
    e = json.loads(lines[1])
    e["experts"][0][1] = 2
    lines[1] = json.dumps(e)
    (r / "routes.jsonl").write_text("\n".join(lines) + "\n")


def _record(key, path, value):
    def edit(r):
        run = json.loads((r / "run.json").read_text())
        node = run[key]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        (r / "run.json").write_text(json.dumps(run))
    return edit


@pytest.mark.parametrize("term, edit, named", [
    ("logits", _flip_logit, "logit row 1 first differs at vocab index 2"),
    ("tokens", _token, "token 2: 8 vs oracle 2"),
    ("response", lambda r: (r / "response.txt").write_text("abd"), "byte 2: 64, oracle 63"),
    ("routes", _route, "event 1 (pass 1, layer 0): /experts/0/1: 2, oracle 3"),
    ("consumer", _record("consumer", ["graph", "sha256", 1], "ce"), "/graph/sha256/1: 'ce', oracle 'cd'"),
    ("destination", _record("destination", ["device_memory"], "cuda0"), "/device_memory: 'cuda0', oracle None"),
])
def test_each_term_fails_alone_and_names_the_first_difference(pair, term, edit, named):
    r, o = pair
    edit(r)
    e = exactness.relation(r, o)
    assert not e["exact"]
    failed = [k for k, t in e["terms"].items() if not t["equal"]]
    if term == "tokens":  # a token and its logits are separate files: only the token list was edited
        assert failed == ["tokens"]
    else:
        assert failed == [term]
    assert named in e["terms"][term]["first_difference"]


def test_missing_records_are_differences_never_passes(pair):
    r, o = pair
    (r / "run.json").write_text("{}")
    (r / "response.txt").unlink()
    (r / "routes.jsonl").unlink()
    e = exactness.relation(r, o)
    t = e["terms"]
    assert not any(t[k]["equal"] for k in ("consumer", "destination", "response", "routes"))
    assert "no consumer record" in t["consumer"]["first_difference"]
    assert t["routes"]["first_difference"] == "0 route events, oracle 3"


def test_first_difference_of_json_values():
    assert exactness.first_difference({"a": [1, 2]}, {"a": [1, 2]}) is None
    assert exactness.first_difference({"a": [1, 2]}, {"a": [1, 2, 3]}) == "/a: 2 items, oracle 3"
    assert exactness.first_difference({"a": 1}, {"b": 1}) == "/a: present in the run only"
    assert exactness.first_difference(1, 1.0) == "/: 1, oracle 1.0"  # types differ: not equal
