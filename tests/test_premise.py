"""The matched source campaign's premise (reference 004 eq. 1, S > H_cap - R_policy): holds by
construction of the config, is checked before any matched cell runs, and a config where it
cannot hold stops with one line giving both sides."""

import json
import re
import subprocess
import sys

import pytest

from residency.evidence import premise

MiB = 1 << 20


def test_eq1_holds_by_one_minus_ratio_of_the_model():
    doc = premise.matched_source(t_repr=100 * MiB, reserve=40 * MiB, ratio=0.244, windows=8, chunk_bytes=MiB // 8)
    a = int(0.244 * 100 * MiB)
    assert doc["weight_allowance_bytes"] == a and doc["h_cap_bytes"] == a + 40 * MiB
    assert doc["margin_bytes"] == 100 * MiB - a > 0  # S - (H_cap - R_policy)
    assert doc["d_and_p_budget_bytes"] == a - 7 * (MiB // 8)


@pytest.mark.parametrize("ratio", [1.0, 1.5])
def test_a_ratio_at_which_the_model_fits_is_refused(ratio):
    with pytest.raises(premise.PremiseError, match=r"eq\. 1 does not hold: S = T_repr = 104857600 bytes is not "
                                                   rf"above H_cap - R_policy = {int(ratio * 100 * MiB)} bytes"):
        premise.matched_source(100 * MiB, 40 * MiB, ratio, 8, MiB)


def test_an_allowance_without_room_for_f_windows_is_refused():
    with pytest.raises(premise.PremiseError, match="does not hold F's 8 windows"):
        premise.matched_source(100 * MiB, 40 * MiB, 0.05, 8, 2 * MiB)


def test_the_command_stops_in_one_line_and_writes_nothing(tmp_path):
    inv, cal, out = tmp_path / "inv.json", tmp_path / "cal.json", tmp_path / "premise.json"
    inv.write_text(json.dumps({"tensor_bytes": 100 * MiB}))
    cal.write_text(json.dumps({"overhead_bytes": 30 * MiB, "reserve_bytes": 33 * MiB}))
    base = [sys.executable, "-m", "residency.cli", "premise", "matched-source", "--inventory", str(inv),
            "--overhead", str(cal), "--windows", "8", "--chunk-bytes", str(MiB), "--out", str(out)]
    bad = subprocess.run(base + ["--ratio", "1.0"], capture_output=True, text=True)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1 and not out.exists(), bad.stderr
    assert "S = T_repr = 104857600 bytes" in bad.stderr and "H_cap - R_policy = 104857600 bytes" in bad.stderr
    ok = subprocess.run(base + ["--ratio", "0.244"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(out.read_text())["r_policy_bytes"] == 33 * MiB


def test_c8_premise_holds_with_both_margins():
    doc = premise.bounded_source(t_repr=100 * MiB, reserve=10 * MiB, ratio=0.44, f_budget=20 * MiB,
                                 natural_peak=40 * MiB)
    assert doc["h_cap_bytes"] == int(0.44 * 100 * MiB) + 10 * MiB
    assert doc["margin_bytes"] == 100 * MiB - int(0.44 * 100 * MiB)
    assert doc["p_natural_headroom_bytes"] == doc["h_cap_bytes"] - 40 * MiB > 0


@pytest.mark.parametrize("kw, needle", [
    (dict(ratio=1.0), "eq. 1 does not hold: S = T_repr = 104857600 bytes is not above H_cap - R_policy = 104857600"),
    (dict(natural_peak=60 * MiB), "P's natural peak 62914560 bytes is not below H_cap"),
    (dict(f_budget=50 * MiB), "F's budget 52428800 bytes is above the weight allowance"),
])
def test_c8_premise_refuses_a_point_where_it_cannot_hold(kw, needle):
    args = dict(t_repr=100 * MiB, reserve=10 * MiB, ratio=0.44, f_budget=20 * MiB, natural_peak=40 * MiB) | kw
    with pytest.raises(premise.PremiseError, match=re.escape(needle)):
        premise.bounded_source(**args)
