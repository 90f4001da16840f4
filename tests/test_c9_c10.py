"""Claims C9 (resident against storage-backed operating points) and C10 (the carrier premise
and its stop), and table 10, on fake generate runs: each passes, fails and is insufficient."""

import json

import pandas as pd
import pytest

from residency import claims
from residency.render import tables_certificate
from residency.claims import verify

import test_matched_source as ms
import test_model_claims as mc

SETTINGS = {**ms.SETTINGS, "c9_ratio": 0.5, "c10_target_tokens_per_s": 8.803}
MODEL_RUNS = ("results", "pager_model.parquet")
MATCHED = ("results", "matched_source.parquet")


def edit(root, parts, change):
    p = root.joinpath(*parts)
    df = pd.read_parquet(p)
    out = change(df)  # a new frame, or None: changed in place
    (df if out is None else out).to_parquet(p, index=False)


def timed(resident=(1.0, 0.001), storage=(4.965, 0.014126), **kw):
    """The model study with the resident (baseline) and storage-backed (D at r=0.5) paths'
    total wall and prefill, in seconds (the reference's ratios by default)."""
    def make(tmp_path):
        root = mc.project(tmp_path, **kw)

        def change(df):
            base = df["campaign"] == "baseline"
            d = (df["campaign"] == "main") & (df["arm"] == "pager-declared") & (df["r"] == 0.5)
            for mask, (wall, ttft) in ((base, resident), (d, storage)):
                df.loc[mask, "wall_ns"] = int(wall * 1e9)
                df.loc[mask, "prefill_ns"] = int(ttft * 1e9)
        edit(root, MODEL_RUNS, change)
        return root
    return make


def test_c9_passes_with_the_reference_ratios(tmp_path):
    root = timed()(tmp_path)
    doc = claims.make("C9", root, SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    v = doc["values"]
    assert v["resident"]["runs"] == v["resident"]["completed"] == 2
    assert v["storage"]["runs"] == v["storage"]["completed"] == 3 and v["storage"]["r"] == 0.5
    assert v["storage_over_resident"]["total_wall"] == pytest.approx(4.965)
    assert v["storage_over_resident"]["ttft"] == pytest.approx(14.126)
    assert v["same_task"] is True and "not a ranking" in doc["headline"] and "prefill_ns" in v["ttft_is"]
    assert "C9" in claims.model_claim_ids()
    assert verify.verify("C9", root) == [] and verify.replay("C9", root) == []


@pytest.mark.parametrize("storage, pointer", [((0.9, 0.014), "total_wall"), ((5.0, 0.0009), "ttft")])
def test_c9_fails_when_the_storage_path_is_not_slower(tmp_path, storage, pointer):
    doc = claims.make("C9", timed(storage=storage)(tmp_path), SETTINGS)
    assert doc["verdict"] == "fail"
    failed = [r for r in doc["reasons"] if r.startswith("failed:")]
    assert len(failed) == 1 and f"/values/storage_over_resident/{pointer}" in failed[0]


def test_c9_fails_when_a_storage_run_is_not_exact(tmp_path):
    doc = claims.make("C9", timed(flip_run=("pager-declared", 0.5, 2))(tmp_path), SETTINGS)
    assert doc["verdict"] == "fail"
    assert doc["values"]["storage"]["completed"] == 2 and doc["values"]["storage"]["runs"] == 3
    assert any("/values/storage/all_completed" in r for r in doc["reasons"] if r.startswith("failed:"))


def test_c9_is_insufficient_without_the_baseline(tmp_path):
    root = timed()(tmp_path)
    edit(root, MODEL_RUNS, lambda df: df[df["campaign"] != "baseline"])
    doc = claims.make("C9", root, SETTINGS)
    assert doc["verdict"] == "insufficient-evidence"
    assert any("no unconstrained baseline runs" in r for r in doc["reasons"])


def test_c9_is_insufficient_at_a_ratio_without_runs(tmp_path):
    doc = claims.make("C9", timed()(tmp_path), {**SETTINGS, "c9_ratio": 0.625})
    assert doc["verdict"] == "insufficient-evidence"
    assert any("at r=0.625" in r and "ratios there: 0.25, 0.5, 0.75" in r for r in doc["reasons"])


def carrier(read_ns_per_cell):
    """The matched campaign with every D cell's source read time (64 MiB physical, 4 outputs:
    16 MiB per output, so 8.803 tokens/s needs about 147.7 MB/s)."""
    def make(tmp_path):
        root = ms.project(tmp_path)
        if read_ns_per_cell is not None:
            edit(root, MATCHED, lambda df: df.__setitem__("source_read_ns", df["source_read_ns"].where(
                df["source_arm"] != "D", read_ns_per_cell)))
        return root
    return make


NEED = 8.803 * (16 << 20)


def test_c10_stops_when_the_carrier_is_below_the_need(tmp_path):
    root = carrier(int((64 << 20) / (NEED / 2) * 1e9))(tmp_path)  # half the need
    doc = claims.make("C10", root, SETTINGS)
    assert doc["verdict"] == "pass", doc["reasons"]
    v = doc["values"]
    assert v["decision"] == "stop" and len(v["d_cells"]) == 6
    assert v["bytes_per_token"] == 16 << 20 and v["needed_bandwidth_bytes_per_s"] == pytest.approx(NEED)
    assert v["measured_over_needed"] == pytest.approx(0.5, rel=1e-6) and v["margin_bytes_per_s"] < 0
    assert verify.verify("C10", root) == [] and verify.replay("C10", root) == []


def test_c10_fails_when_the_carrier_meets_the_need(tmp_path):
    doc = claims.make("C10", carrier(int((64 << 20) / (NEED * 2) * 1e9))(tmp_path), SETTINGS)
    assert doc["verdict"] == "fail"
    assert doc["values"]["decision"] == "advance"
    assert any("/values/decision" in r for r in doc["reasons"] if r.startswith("failed:"))


def test_c10_is_insufficient_without_the_source_read_time(tmp_path):
    root = carrier(None)(tmp_path)  # the fixture's runs record no read_ns: gathered as null
    assert pd.read_parquet(root.joinpath(*MATCHED))["source_read_ns"].isna().all()
    doc = claims.make("C10", root, SETTINGS)
    assert doc["verdict"] == "insufficient-evidence" and doc["values"]["decision"] is None
    assert any("carry no source read time" in r for r in doc["reasons"])


def test_c10_is_insufficient_without_an_exact_d_cell(tmp_path):
    root = carrier(10**9)(tmp_path)
    edit(root, MATCHED, lambda df: df.__setitem__("exact", df["exact"].where(df["source_arm"] != "D", False)))
    doc = claims.make("C10", root, SETTINGS)
    assert doc["verdict"] == "insufficient-evidence"
    assert any("no D cell of the matched source campaign completed exactly" in r for r in doc["reasons"])


def test_table10_one_row_per_record(tmp_path):
    c10 = claims.make("C10", carrier(int((64 << 20) / (NEED / 2) * 1e9))(tmp_path / "a"), SETTINGS)
    c9 = claims.make("C9", timed(storage=(0.9, 0.014))(tmp_path / "b"), SETTINGS)
    paths = []
    for doc in (c10, c9):
        p = tmp_path / f"{doc['id']}.json"
        p.write_text(json.dumps(doc))
        paths.append(str(p))
    df = tables_certificate.table10_negative(paths, tmp_path / "t10")
    assert list(df["record"]) == ["C10", "C9"] and list(df["verdict"]) == ["pass", "fail"]
    assert "did not advance" in df["consequence"].iloc[0] and "not a ranking" in df["consequence"].iloc[1]
    assert "does not hold here" in df["consequence"].iloc[1]
    md = (tmp_path / "t10.md").read_text()
    assert md.startswith("<!-- Table 10") and (tmp_path / "t10.csv").exists() and (tmp_path / "t10.tex").exists()
