"""The cache-transfer campaign (claim C7): the cells' order and flags, the gather of fake
generate runs into results/cache_transfer.parquet, and C7 on it: passes, fails, insufficient."""

import json
import shlex
from pathlib import Path

import pandas as pd
import pytest

from residency.campaigns import cache_transfer
from residency import claims
from residency.core import config, lineage, trace
from residency.core.arms import PAGER_LRU_K, PAGER_ZERO
from residency.gather.studies import table_from
from residency.gather.cache_transfer import gather_cache_transfer

from fixtures import make_model_run, seal
from test_config import default

TABLE = ("results", "cache_transfer.parquet")


def test_cells_alternate_and_differ_only_in_the_arm():
    cfg = default()
    cfg["cache_transfer"]["prompts"] = ["a", "b", "c"]
    assert cache_transfer.order(cfg) == [(0, PAGER_ZERO), (0, PAGER_LRU_K), (1, PAGER_LRU_K), (1, PAGER_ZERO),
                                         (2, PAGER_ZERO), (2, PAGER_LRU_K)]
    runs = cache_transfer.runs(cfg)
    assert runs[0] == "results/runs/cache_transfer/pair0/pager-zero/harness.json"
    assert cache_transfer.previous_run(cfg, 0, PAGER_ZERO) == []
    assert cache_transfer.previous_run(cfg, 1, PAGER_ZERO) == [runs[2]]
    z, k = (shlex.join(cache_transfer.generate_args(cfg, a, "m.gguf")) for a in (PAGER_ZERO, PAGER_LRU_K))
    assert f"--lru-k {cfg['cache_transfer']['k']}" in k and "--lru-k" not in z
    assert k.replace(f" --lru-k {cfg['cache_transfer']['k']}", "").replace(PAGER_LRU_K, PAGER_ZERO) == z
    assert "--meta order=2" in shlex.join(cache_transfer.harness_args(cfg, 1, PAGER_LRU_K))


def test_config_checks_the_section():
    cfg = default()
    cfg["cache_transfer"]["model"] = "user:nope"
    with pytest.raises(config.ConfigError, match="cache_transfer.model"):
        config.validate(cfg)
    cfg = default()
    del cfg["cache_transfer"]["k"]
    with pytest.raises(config.ConfigError):
        config.validate(cfg)


def test_the_default_runs_the_references_population():
    c = default()["cache_transfer"]
    assert len(c["prompts"]) == 5 and c["k"] == 32  # five prompts, per-layer LRU32 (004 §5.1)
    assert cache_transfer.premise_error(default()) is None


@pytest.mark.parametrize("change, needle", [
    (lambda c: c["prompts"].append(c["prompts"][1]), "cache_transfer.prompts[5]: the same prompt as prompts[1]"),
    (lambda c: c.update(tokens=1), "cache_transfer.tokens: 1 leaves no decode pass"),
])
def test_pairs_that_cannot_be_the_references_are_refused_in_one_line(change, needle):
    cfg = default()
    change(cfg["cache_transfer"])
    config.validate(cfg)  # the schema admits it: the premise check is what refuses
    msg = cache_transfer.premise_error(cfg)
    assert msg is not None and msg.startswith("config error: ") and "\n" not in msg and needle in msg, msg


def _cell(root, pair, arm, order, *, phys, decode_ns, flip=None, status="ok", warm=False):
    d = make_model_run(root / "runs", "cache_transfer", arm, None, pair, flip=flip, status=status, sealed=False)
    run = json.loads((d / "run.json").read_text())
    run["counters"]["physical_bytes_read"] = phys
    run["generation"]["decode_ns"] = decode_ns
    run["config"]["lru_k"] = 8 if arm == PAGER_LRU_K else None
    (d / "run.json").write_text(json.dumps(run))
    h = json.loads((d / "harness.json").read_text())
    h["meta"].update({"pair": str(pair), "order": str(order)})
    if warm:
        h["dropped_cache"] = []
    (d / "harness.json").write_text(json.dumps(h))
    return seal(d)


def project(tmp_path, pairs=((1000, 400, 9, 2), (1000, 390, 8, 3)), flip_pair=None, drop=None, failed=None,
            warm=None):
    """Fake cells: per pair (zero bytes, lru-k bytes, zero decode s, lru-k decode s)."""
    root = tmp_path / "p"
    dirs = []
    for i, (zb, kb, zd, kd) in enumerate(pairs):
        arms = (PAGER_ZERO, PAGER_LRU_K) if i % 2 == 0 else (PAGER_LRU_K, PAGER_ZERO)
        for j, arm in enumerate(arms):
            if drop == (i, arm):
                continue
            zero = arm == PAGER_ZERO
            dirs.append(_cell(root, i, arm, 2 * i + j, phys=zb if zero else kb, decode_ns=int((zd if zero else kd) * 1e9),
                              flip=9 if (flip_pair == i and not zero) else None,
                              status="failed" if failed == (i, arm) else "ok", warm=warm == (i, arm)))
    res = root / "results"
    res.mkdir(parents=True)
    (res / "machine.json").write_text(json.dumps({"hostname": "test"}))
    (res / "probe.json").write_text(json.dumps({"cgroup": {"version": 1}}))
    gather_cache_transfer(dirs, str(root.joinpath(*TABLE)))
    return root


def test_gather_pairs_and_lineage(tmp_path):
    root = project(tmp_path, flip_pair=1)
    p = root.joinpath(*TABLE)
    t = pd.read_parquet(p)
    assert list(t["order"]) == [0, 1, 2, 3] and list(t["arm"]) == [PAGER_ZERO, PAGER_LRU_K, PAGER_LRU_K, PAGER_ZERO]
    assert list(t["lru_k"].fillna(0)) == [0, 8, 8, 0] and t["cold_start"].all()
    # the fixture's trace: 6 steps a pass; pass 0 is the prefill, pass 1 the first decode pass
    tr = trace.read(Path(t["run_dir"][0]) / "trace.bin").accesses
    first = tr[tr["step"] // 6 == 1]
    assert list(t["first_decode_misses"]) == [int((first["flags"] & trace.FLAG_MISS != 0).sum())] * 4
    assert (t["first_decode_hits"] + t["first_decode_misses"] == len(first)).all() and t["prefill_misses"].notna().all()
    assert t[t["pair"] == 0]["logits_equal_pair"].all() and not t[t["pair"] == 1]["logits_equal_pair"].any()
    lin = lineage.of(p)
    assert lin["study"] == "cache-transfer" and len(lin["run_dirs"]) == 4
    assert table_from(lin).to_pandas().equals(t)


def test_c7_holds_on_the_host_and_names_the_gpu_half_when_every_pair_is_exact_and_lru_k_wins(tmp_path):
    doc = claims.make("C7", project(tmp_path), {})
    # Every host assertion holds; the H2D half has no measurement without a device: not a pass.
    assert doc["verdict"] == "insufficient-evidence", doc["reasons"]
    assert [r.split(" (")[0] for r in doc["reasons"]] == ["unevaluable: /values/h2d_bytes_fewer: value missing"]
    v = doc["values"]
    assert v["n_pairs"] == 2 and v["exact"] == [True] * 4
    assert v["pairs"]["1"]["order"] == [PAGER_LRU_K, PAGER_ZERO]
    assert v["bytes_reduction"] == pytest.approx(1 - 790 / 2000)
    assert v["decode_reduction"] == pytest.approx(1 - 5 / 17)
    assert v["pairs"]["0"]["cold_start"] == [True, True] and v["pairs"]["0"]["first_decode_hits"]["lru_k"] is not None
    assert [r["revision"] for r in v["protocol_revisions"]] == ["C7 r1 (issue 22)"]
    assert "five prompts" in v["protocol_revisions"][0]["follows"]


@pytest.mark.parametrize("kw, pointer", [
    ({"flip_pair": 1}, "/values/exact"),
    ({"pairs": ((1000, 400, 9, 2), (1000, 1000, 8, 3))}, "/values/fewer_bytes"),
    ({"pairs": ((1000, 400, 9, 2), (1000, 390, 3, 3))}, "/values/lower_decode"),
])
def test_c7_fails_when_one_pair_breaks_the_statement(tmp_path, kw, pointer):
    doc = claims.make("C7", project(tmp_path, **kw), {})
    assert doc["verdict"] == "fail"
    assert any(pointer in r for r in doc["reasons"]), doc["reasons"]


@pytest.mark.parametrize("kw, why", [({"drop": (1, PAGER_ZERO)}, "pair 1 has cells"),
                                     ({"failed": (0, PAGER_LRU_K)}, "did not finish ok"),
                                     ({"warm": (1, PAGER_LRU_K)}, "pair 1: a cell did not start cold")])
def test_c7_is_insufficient_without_complete_pairs(tmp_path, kw, why):
    doc = claims.make("C7", project(tmp_path, **kw), {})
    assert doc["verdict"] == "insufficient-evidence"
    assert any(why in r for r in doc["reasons"]), doc["reasons"]
