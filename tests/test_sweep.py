"""The model sweep end to end through Snakemake: two tiny synthetic models of two
architecture families (qwen2 dense, qwen3moe MoE), one r, one rep, a few tokens; each
model's Parquet, table and claims under its own paths, and results/tables/models.*."""

import json

import pandas as pd
import pytest
import yaml

from conftest import snakemake, tiny_config, engine_build_dir

pytestmark = pytest.mark.integration

MODELS = ["synthetic-dense", "synthetic-moe"]
MODEL_CLAIMS = ["P2", "P6", "P7", "P8", "P9", "P10", "P11"]


def sweep_config(work):
    cfg = tiny_config(engine_build_dir(work))
    pm = cfg["pager_model"]
    pm.update(models=MODELS, ratios=[0.75], reps=1, baseline_reps=1, tokens=3)
    syn = cfg["models"]["synthetic"]
    # the default shapes (about 26 and 31 MB): at r=0.75 the declared arm keeps the chunks
    # two compute threads need
    syn["dense"]["arch"] = "qwen2"
    syn["moe"]["arch"] = "qwen3moe"
    return cfg


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    from conftest import ROOT

    work = tmp_path_factory.mktemp("sweep")
    (work / "engine").symlink_to(ROOT / "engine")
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(sweep_config(work)))
    proc = snakemake(work, "results/tables/models.csv", "results/sweep/synthetic-moe/tables/pager-model.csv",
                     "--cores", "2", "--resources", "storage_exclusive=1")
    if proc.returncode != 0:
        pytest.fail("snakemake failed:\n" + proc.stderr[-4000:])
    return work


def test_each_model_has_its_own_outputs(sweep):
    # the primary (first entry) where a single model's are; the second under results/sweep
    for runs in ("results/pager_model.parquet", "results/sweep/synthetic-moe/pager_model.parquet"):
        df = pd.read_parquet(sweep / runs)
        assert len(df) == 4 + 1 and df["valid"].all() and df["exact"].all(), runs
    dense = pd.read_parquet(sweep / "results/pager_model.parquet")
    moe = pd.read_parquet(sweep / "results/sweep/synthetic-moe/pager_model.parquet")
    assert set(dense["config_digest"]).isdisjoint(set(moe["config_digest"]))
    for cid in MODEL_CLAIMS:
        a = json.loads((sweep / "claims" / f"{cid}.json").read_text())
        b = json.loads((sweep / "claims/models/synthetic-moe" / f"{cid}.json").read_text())
        assert a["scope"]["model_sha256"] != b["scope"]["model_sha256"], cid
    assert (sweep / "results/calibration/pager_model-synthetic-moe.json").exists()
    assert (sweep / "results/runs/pager_model/synthetic-moe/graph-plan/graph-plan.json").exists()


def test_models_table(sweep):
    df = pd.read_csv(sweep / "results/tables/models.csv")
    assert list(df["model"]) == MODELS and list(df["architecture"]) == ["qwen2", "qwen3moe"]
    assert (df["exact"] == "5/5").all()
    assert (df["D/OPT r=0.75"] >= 1).all()
    assert {"D/A bytes r=0.75", "D/C bytes r=0.75", "A tok/s", "D tok/s"} <= set(df.columns)
    assert set(MODEL_CLAIMS) <= set(df.columns)
    assert (sweep / "results/tables/models.md").exists() and (sweep / "results/tables/models.tex").exists()


def test_adding_a_model_reruns_nothing_of_the_others(sweep):
    cfg = yaml.safe_load((sweep / "config" / "config.yaml").read_text())
    cfg["pager_model"]["models"] = MODELS[:1]
    (sweep / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(sweep, "-n", "results/pager_model.parquet", "claims/P7.json", "--cores", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
