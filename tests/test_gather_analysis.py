"""Gather writes the declared Parquet schema; analysis recomputes OPT from each trace."""

import pandas as pd
import pyarrow.parquet as pq

from residency.analysis import opt as analysis
from residency.gather import pager as gather

from fixtures import make_run, region_identity, seal


def campaign(tmp_path, extra_miss_steps=()):
    dirs = []
    for arm in ("kernel-mmap", "pager-lru", "pager-declared"):
        for r in (0.25, 0.5):
            for rep in (1, 2):
                dirs.append(make_run(tmp_path / "runs", "main", arm, r, rep,
                                     extra_miss_steps=extra_miss_steps if (arm, rep) == ("pager-declared", 2) else ()))
    return dirs


def test_gather_schema_and_values(tmp_path):
    dirs = campaign(tmp_path)
    out = tmp_path / "pager_synthetic.parquet"
    gather.gather_pager_synthetic(dirs, region_identity(tmp_path), out)
    table = pq.read_table(out)
    assert table.schema.equals(gather.PAGER_SYNTHETIC_SCHEMA, check_metadata=False)
    df = table.to_pandas()
    assert len(df) == len(dirs)
    lru = df[df["arm"] == "pager-lru"]
    assert (lru["misses"] == lru["accesses"]).all()
    assert (lru["misses_after_cold"] == lru["accesses_after_cold"]).all()
    assert set(df["arm_letter"]) == {"A", "C", "D"}
    assert df["trace_sha256"].str.len().eq(64).all()


def test_gather_refuses_unrecorded_run(tmp_path):
    d = tmp_path / "runs" / "never"
    d.mkdir(parents=True)
    import pytest
    with pytest.raises(FileNotFoundError, match="no harness.json"):
        gather.gather_pager_synthetic([d], region_identity(tmp_path), tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()


def test_opt_and_determinism(tmp_path):
    dirs = campaign(tmp_path, extra_miss_steps=(16,))
    runs_p = tmp_path / "runs.parquet"
    gather.gather_pager_synthetic(dirs, region_identity(tmp_path), runs_p)
    analysis.analyse_pager_synthetic(runs_p, tmp_path / "opt.parquet", tmp_path / "det.parquet")
    opt = pd.read_parquet(tmp_path / "opt.parquet")
    d = opt[opt["arm"] == "pager-declared"]
    assert (d["opt_misses"] == d["opt_closed_form"]).all()
    exact = d[d["rep"] == 1]
    assert (exact["d_over_opt"] == 1.0).all()
    assert (d[d["rep"] == 2]["d_over_opt"] > 1.0).all()
    det = pd.read_parquet(tmp_path / "det.parquet")
    dd = det[det["arm"] == "pager-declared"]
    assert (dd["distinct_traces"] == 2).all() and not dd["identical"].any()
    assert (dd["first_differing_step"] == 16).all()
    assert det[det["arm"] == "pager-lru"]["identical"].all()


def test_rows_carry_the_llama_build_and_the_content_checks(tmp_path):
    import json

    from residency.inputs import llama_build

    dirs = campaign(tmp_path)
    for i, d in enumerate(dirs):
        run = json.loads((d / "run.json").read_text())
        run["counters"].update(content_checks=10 + i, content_check_ns=1000 * i, content_mismatches=0)
        (d / "run.json").write_text(json.dumps(run))
        seal(d)  # the run as the engine would have recorded it
    ident = {"commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f", "source": "pypi-sdist", "sdist_sha256": "a" * 64,
             "checkout": None, "build_type": "Release", "native": True, "compiler": "c++ 12",
             "libs_sha256": {"libllama.a": "b" * 64}, "build_seconds": 70.1,
             "cmake_args": ["-DCMAKE_INSTALL_PREFIX=/somewhere/install", "-DGGML_NATIVE=ON"]}
    llama = tmp_path / "llama-identity.json"
    llama.write_text(json.dumps(ident))
    out = tmp_path / "runs.parquet"
    gather.gather_pager_synthetic(dirs, region_identity(tmp_path), out, llama)
    df = pd.read_parquet(out)
    assert (df["llama_commit"] == ident["commit"]).all()
    assert (df["llama_build_sha256"] == llama_build.build_digest(ident)).all()
    assert sorted(df["content_checks"]) == [10 + i for i in range(len(dirs))]
    assert (df["content_mismatches"] == 0).all()
    # the build's identity, not where it was installed nor how long it took
    moved = ident | {"build_seconds": 99.0, "cmake_args": ["-DCMAKE_INSTALL_PREFIX=/elsewhere", "-DGGML_NATIVE=ON"]}
    assert llama_build.build_digest(moved) == llama_build.build_digest(ident)
    assert llama_build.build_digest(ident | {"libs_sha256": {"libllama.a": "c" * 64}}) != llama_build.build_digest(ident)
    analysis.analyse_pager_synthetic(out, tmp_path / "opt.parquet", tmp_path / "det.parquet")
    opt = pd.read_parquet(tmp_path / "opt.parquet")
    assert (opt["llama_build_sha256"] == llama_build.build_digest(ident)).all()


def test_a_killed_run_without_a_chunk_size_gets_no_opt_and_stops_nothing(tmp_path):
    """An OOM-killed cell has no run.json, so its gathered row has a budget but no chunk size
    (seen for arm A at its limit in the tiny campaign, 2026-12-07: the analysis stopped on it)."""
    runs_p = tmp_path / "runs.parquet"
    gather.gather_pager_synthetic(campaign(tmp_path), region_identity(tmp_path), runs_p)
    df = pd.read_parquet(runs_p)
    killed = df.index[(df["arm"] == "kernel-mmap") & (df["rep"] == 1)][0]
    df.loc[killed, ["chunk_bytes", "status"]] = [None, "oom-killed"]
    df.to_parquet(runs_p)
    analysis.analyse_pager_synthetic(runs_p, tmp_path / "opt.parquet", tmp_path / "det.parquet")
    opt = pd.read_parquet(tmp_path / "opt.parquet").set_index("run_dir")
    row = opt.loc[df.loc[killed, "run_dir"]]
    assert pd.isna(row["capacity_chunks"]) and pd.isna(row["nominal_capacity_chunks"]) and pd.isna(row["opt_misses"])
    others = opt.drop(index=df.loc[killed, "run_dir"])
    assert others["capacity_chunks"].notna().all() and others["opt_misses"].notna().all()
