"""The model sweep's table (results/tables/models.*) and claims of a sweep model, from
fixture Parquet (tests/test_model_claims.py's consistent fake runs)."""

import copy
import json

import pandas as pd
import pytest

from residency import claims
from residency.core import config
from residency.render import tables

from conftest import ROOT
from test_model_claims import SETTINGS, project


def _inventory(path, arch, types):
    path.write_text(json.dumps({"architecture": arch, "tensor_bytes": 1234,
                                "tensors": [{"name": f"t{i}", "type": t} for i, t in enumerate(types)]}))
    return path


def _sweep_claims(root, results, out_dir):
    """The model claims computed from `results` into out_dir, as the claim_sweep rule does."""
    out = []
    for cid in claims.model_claim_ids():
        p = out_dir / f"{cid}.json"
        claims.make(cid, root, SETTINGS, p, results=results)
        out.append(str(p))
    return out


def test_model_claim_ids():
    assert claims.model_claim_ids() == ["C9", "P10", "P11", "P2", "P6", "P7", "P8", "P9"]
    assert claims.input_paths("P7", "results/sweep/qwen") == [
        "results/sweep/qwen/pager_model_opt.parquet", "results/machine.json", "results/probe.json"]
    with pytest.raises(SystemExit, match="C2 is not a model claim"):
        claims.input_paths("C2", "results/sweep/qwen")


def test_sweep_claims_and_models_table(tmp_path, monkeypatch):
    root = project(tmp_path)
    monkeypatch.chdir(root)
    sweep = root / "results" / "sweep" / "qwen"
    sweep.mkdir(parents=True)
    for f in ("pager_model.parquet", "pager_model_opt.parquet", "pager_model_roofline.parquet"):
        (sweep / f).write_bytes((root / "results" / f).read_bytes())
    primary = _sweep_claims(root, None, root / "claims")
    other = _sweep_claims(root, "results/sweep/qwen", root / "claims" / "models" / "qwen")
    doc = json.loads((root / "claims" / "models" / "qwen" / "P7.json").read_text())
    assert doc["inputs"][0]["path"] == "results/sweep/qwen/pager_model_opt.parquet"
    assert doc["commands"] == {"regenerate": f"snakemake --cores 1 {root / 'claims/models/qwen/P7.json'}"}
    assert (root / "claims" / "models" / "qwen" / "history" / "P7.jsonl").exists()
    assert len((root / "claims" / "history" / "P7.jsonl").read_text().splitlines()) == 1  # each its own history
    models = [
        {"name": "smollm2", "runs": "results/pager_model.parquet", "opt": "results/pager_model_opt.parquet",
         "inventory": str(_inventory(root / "a.json", "llama", ["F32", "Q4_1", "Q4_1"])), "claims": primary},
        {"name": "qwen", "runs": "results/sweep/qwen/pager_model.parquet",
         "opt": "results/sweep/qwen/pager_model_opt.parquet",
         "inventory": str(_inventory(root / "b.json", "qwen2", ["Q8_0", "F32"])), "claims": other},
    ]
    df = tables.models_summary(models, root / "results" / "tables" / "models")
    assert list(df["model"]) == ["smollm2", "qwen"] and list(df["architecture"]) == ["llama", "qwen2"]
    assert list(df["quant_types"]) == ["F32 Q4_1", "F32 Q8_0"] and (df["t_repr_bytes"] == 1234).all()
    assert (df["exact"] == f"{2 + 4 * 3 * 3}/{2 + 4 * 3 * 3}").all()
    cols = list(df.columns)
    for r in ("0.25", "0.5", "0.75"):
        assert {f"D/OPT r={r}", f"D/A bytes r={r}", f"D/C bytes r={r}"} <= set(cols)
    assert {"A tok/s", "C tok/s", "D tok/s", "E tok/s"} <= set(cols)
    assert cols[-8:] == ["P2", "P6", "P7", "P8", "P9", "P10", "P11", "C9"]
    assert (df[["P2", "P7", "P11"]] == "pass").all().all()
    assert (df["D/OPT r=0.5"] >= 1).all()
    # D reads 1 MiB + 4 KiB per miss like C, A reads 3 MiB per miss (readahead): D/A < 1
    assert (df["D/A bytes r=0.5"] < 1).all()
    csv = pd.read_csv(root / "results" / "tables" / "models.csv")
    assert list(csv["model"]) == ["smollm2", "qwen"]
    assert (root / "results" / "tables" / "models.md").read_text().startswith("<!-- The model sweep")
    assert "\\begin{table}" in (root / "results" / "tables" / "models.tex").read_text()


def _default():
    return config.load(ROOT / "config" / "config.yaml")


@pytest.mark.parametrize("models, needle", [
    (["smollm2", "user:nobody"], "config error: pager_model.models[1]: 'user:nobody' is not declared under models.user"),
    (["smollm2", "synthetic-big"], "config error: pager_model.models[1]: 'synthetic-big' does not match"),
    (["smollm2", "smollm2"], "config error: pager_model.models: ['smollm2', 'smollm2'] has non-unique elements"),
    ([], "config error: pager_model.models: [] should be non-empty"),
])
def test_a_bad_models_entry_is_one_line(models, needle):
    c = copy.deepcopy(_default())
    c["pager_model"]["models"] = models
    with pytest.raises(config.ConfigError) as info:
        config.validate(c)
    assert str(info.value).startswith(needle) and "\n" not in str(info.value)


def test_two_entries_with_one_name_and_the_old_key():
    c = copy.deepcopy(_default())
    c["models"]["user"] = [{"name": "smollm2", "path": "/x.gguf", "sha256": "0" * 64}]
    c["pager_model"]["models"] = ["smollm2", "user:smollm2"]
    with pytest.raises(config.ConfigError, match=r"models\[1\]: 'user:smollm2': a second model named 'smollm2'"):
        config.validate(c)
    c = copy.deepcopy(_default())
    c["pager_model"]["model"] = "smollm2"
    with pytest.raises(config.ConfigError, match=r"^config error: pager_model.model: now pager_model.models"):
        config.validate(c)


def test_schema_architectures_are_the_generators():
    from residency.inputs import gguf_arch

    schema = config.load_schema()
    assert schema["properties"]["models"]["$defs"]["arch"]["enum"] == list(gguf_arch.FAMILIES)
