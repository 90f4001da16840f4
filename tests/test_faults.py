"""The fault campaign's cells and bad input (config/config.yaml's faults section), the
validators' verdict rule, and claim C12 on fixture rows: pass only with every half shown,
fail when a request differs from the oracle or teardown is unbalanced, and
insufficient-evidence (never pass) without the GPU half."""

import copy
import shlex

import pandas as pd
import pytest
import yaml

from residency.core import config
from residency.campaigns import fault_cells
from residency.evidence import fault_validators
from residency.claims import c12
from residency.claims.record import verdict_of
from conftest import ROOT

CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_each_cell_runs_its_adapter_at_zero_cache_on_the_configured_windows():
    args = shlex.join(fault_cells.generate_args(CONFIG, "synthetic-moe", "eio", "m.gguf"))
    f = CONFIG["faults"]
    assert "--arm pager-zero" in args and f"--source {f['source']} --windows {f['windows']}" in args
    assert args.endswith(f"--fault eio@{f['at']['eio']}") and f"--tokens {f['tokens']}" in args
    assert "--fault" not in shlex.join(fault_cells.generate_args(CONFIG, "synthetic-moe", "none", "m.gguf"))
    oracle = shlex.join(fault_cells.generate_args(CONFIG, "smollm2", "oracle", "m.gguf"))
    assert "--arm kernel-mmap" in oracle and "--budget-bytes" not in oracle
    warm = shlex.join(fault_cells.generate_args(CONFIG, "synthetic-moe", "reset-warm", "m.gguf"))
    assert warm.endswith("--warm-request") and f"--arm {f['warm']['arm']}" in warm
    assert f"--limit-bytes {f['host_cap_bytes']}" in shlex.join(fault_cells.harness_args(CONFIG, "smollm2", "eio"))


def test_c3_set_is_every_cell_on_the_first_adapter_and_the_subset_on_the_second():
    pairs = fault_cells.c3_set(CONFIG)
    f = CONFIG["faults"]
    assert len(pairs) == len(f["cells"]) + len(f["c3_second_adapter"]) == 14
    assert {a for a, _ in pairs} == {"synthetic-moe", "smollm2"}
    runs = fault_cells.fault_runs(CONFIG)
    assert len(runs) == 2 * (len(f["cells"]) + 1) and fault_cells.warm_run(CONFIG) not in runs


def test_an_unknown_cell_is_one_line_naming_the_cells_that_exist():
    with pytest.raises(SystemExit, match=r"unknown fault cell 'gremlins' \(cells: none, short-read, eio"):
        fault_cells.check_cell("gremlins")
    cfg = copy.deepcopy(CONFIG)
    cfg["faults"]["cells"].append("gremlins")
    with pytest.raises(config.ConfigError, match=r"^config error: faults.cells\[10\]: 'gremlins' is not one of"):
        config.validate(cfg)


@pytest.mark.parametrize("edit,message", [
    (lambda f: f.update(source="direct", windows=1),
     r"faults.cells: 'out-of-order' does not apply to source direct with 1 window"),
    (lambda f: f["at"].pop("eio"), r"faults.at: no firing point for cell 'eio'"),
    (lambda f: f.update(c3_second_adapter=["none", "stall"]), r"faults.c3_second_adapter\[1\]: 'stall' is not one of"),
    (lambda f: f.update(cells=["none", "eio"]), r"faults.c3_second_adapter: 'short-read' is not in faults.cells"),
    (lambda f: f.update(adapters=["user:mine"]), r"faults.adapters\[0\]: 'user:mine' is not declared"),
])
def test_a_cell_that_cannot_apply_is_a_config_error(edit, message):
    cfg = copy.deepcopy(CONFIG)
    edit(cfg["faults"])
    with pytest.raises(config.ConfigError, match=message):
        config.validate(cfg)


def test_a_cell_is_valid_only_when_every_check_holds():
    assert fault_validators.verdict({"a": True, "b": True}) == (True, [])
    assert fault_validators.verdict({"a": True, "b": False, "c": None}) == (False, ["b", "c (not evaluable)"])
    assert fault_validators.verdict({"a": True, "c": None}) == (None, ["c (not evaluable)"])


def _warm(**kw) -> pd.DataFrame:
    row = {"status": "ok", "error": None, "requests": 2, "resets": 2, "primary_tokens_equal_oracle": True,
           "warm_tokens_equal_oracle": True, "primary_logits_equal_oracle": True, "warm_logits_equal_primary": True,
           "plan_balanced": True, "tickets_balanced": True, "consumers_balanced": True, "slots_vacant_at_close": 9,
           "slots": 9, "windows_free_at_close": 8, "windows": 8, "plan_shutdown": "ok",
           "primary_physical_bytes_read": 100, "warm_physical_bytes_read": 60, "host_grade": "hard",
           "limit_events": 0, "oom_kills": 0, "gpu_grade": "audited", "run_dir": "r"}
    return pd.DataFrame([row | kw])


def _c12(frame) -> str:
    res = c12.compute({"warm": frame}, {})
    doc = {"values": res.values, "assertions": [a.as_dict() for a in res.assertions]}
    return verdict_of(doc, res.insufficient)[0]


@pytest.mark.parametrize("edit,verdict", [
    ({}, "pass"),
    ({"gpu_grade": "absent"}, "insufficient-evidence"),
    ({"warm_tokens_equal_oracle": False, "gpu_grade": "absent"}, "fail"),
    ({"warm_logits_equal_primary": False}, "fail"),
    ({"resets": 1}, "fail"),
    ({"tickets_balanced": False}, "fail"),
    ({"windows_free_at_close": 7}, "fail"),
    ({"limit_events": 3}, "fail"),
    ({"host_grade": "unenforced"}, "insufficient-evidence"),
    ({"warm_tokens_equal_oracle": None}, "insufficient-evidence"),
])
def test_c12_passes_only_when_both_requests_equal_the_oracle_and_teardown_balances(edit, verdict):
    assert _c12(_warm(**edit)) == verdict
