"""The model sweep end to end through Snakemake: three small models of three architecture
families (the synthetic dense model as qwen2, the synthetic MoE model as qwen3moe, and a
user GGUF of the gemma2 family), one r, one rep, a few tokens; each model's Parquet, table
and claims under its own paths, and results/tables/models.*."""

import json

import pandas as pd
import pytest
import yaml

from conftest import snakemake, tiny_config, engine_build_dir

pytestmark = pytest.mark.integration

MODELS = ["synthetic-dense", "synthetic-moe", "user:g2"]
NAMES = ["synthetic-dense", "synthetic-moe", "g2"]
MODEL_CLAIMS = ["P2", "P6", "P7", "P8", "P9", "P10", "P11", "C9"]


def user_gemma2(work):
    """A GGUF of the user's: a gemma2 model (tied output, post norms, sliding window)."""
    from residency.inputs import gguf_synth

    spec = gguf_synth.make_spec(variant="dense", arch="gemma2", tied_output=True, sliding_window=4, seed=3,
                                n_layer=6, n_embd=512, n_ff=1408, n_head=8, n_head_kv=4, n_vocab=512, n_ctx=512)
    rec = gguf_synth.write(spec, work / "mine" / "g2.gguf")
    return {"name": "g2", "path": str(work / "mine" / "g2.gguf"), "sha256": rec["sha256"]}


def sweep_config(work):
    cfg = tiny_config(engine_build_dir(work))
    cfg["models"]["user"] = [user_gemma2(work)]
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
    tables = [f"results/sweep/{n}/tables/pager-model.csv" for n in NAMES[1:]]
    ledgers = [f"claims/models/{n}/ledger.json" for n in NAMES[1:]]
    proc = snakemake(work, "results/tables/models.csv", *tables, *ledgers, "--cores", "2",
                     "--resources", "storage_exclusive=1")
    if proc.returncode != 0:
        pytest.fail("snakemake failed:\n" + proc.stderr[-4000:])
    return work


def test_each_model_has_its_own_outputs(sweep):
    # the primary (first entry) where a single model's are; the second under results/sweep
    parquets = ["results/pager_model.parquet"] + [f"results/sweep/{n}/pager_model.parquet" for n in NAMES[1:]]
    digests = set()
    for runs in parquets:
        df = pd.read_parquet(sweep / runs)
        assert len(df) == 4 + 1 and df["valid"].all() and df["exact"].all(), runs
        assert digests.isdisjoint(df["config_digest"]), runs
        digests |= set(df["config_digest"])
    for cid in MODEL_CLAIMS:
        docs = [json.loads((sweep / "claims" / f"{cid}.json").read_text())] + [
            json.loads((sweep / "claims/models" / n / f"{cid}.json").read_text()) for n in NAMES[1:]]
        assert len({d["scope"]["model_sha256"] for d in docs}) == 3, cid
    for n in NAMES[1:]:
        assert (sweep / f"results/calibration/pager_model-{n}.json").exists()
        assert (sweep / f"results/runs/pager_model/{n}/graph-plan/graph-plan.json").exists()
        assert (sweep / f"results/sweep/{n}/tables/pager-model.md").exists()


def test_models_table(sweep):
    df = pd.read_csv(sweep / "results/tables/models.csv")
    assert list(df["model"]) == NAMES and list(df["architecture"]) == ["qwen2", "qwen3moe", "gemma2"]
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


def _residency(work, *args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "residency.cli", *args], cwd=work, capture_output=True, text=True)


def test_a_sweep_models_claims_verify_and_replay(sweep):
    """Each further model's claims are listed in its own ledger and verify (deep) and replay
    like the primary's; a changed run of that model is found; --model names model claims only."""
    name = NAMES[1]
    led = json.loads((sweep / f"claims/models/{name}/ledger.json").read_text())
    assert sorted(e["id"] for e in led["claims"]) == sorted(MODEL_CLAIMS)
    p = _residency(sweep, "verify", "--all", "--model", name, "--deep")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"claims/models/{name}/ledger.json: OK" in p.stdout, p.stdout
    p = _residency(sweep, "replay", "--claim", "P7", "--model", name)
    assert p.returncode == 0 and "P7: OK" in p.stdout, p.stdout + p.stderr
    p = _residency(sweep, "verify", "--claim", "C2", "--model", name)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "residency: error: C2 is not a model claim (" + ", ".join(sorted(MODEL_CLAIMS)) + "): --model applies to model claims only"], p.stderr
    run = next((sweep / f"results/runs/pager_model/{name}").glob("pager-declared/r0.75/rep1/run.json"))
    doc = json.loads(run.read_text())
    doc["counters"]["physical_bytes_read"] += 1
    run.write_text(json.dumps(doc))
    p = _residency(sweep, "verify", "--claim", "P7", "--model", name, "--deep")
    assert p.returncode == 1 and str(run.parent.relative_to(sweep)) in p.stdout, p.stdout + p.stderr
