"""The config schema: the embedded default and paper config validate; a bad key or value
stops with one line that names it (in Python, on the CLI and in Snakemake)."""

import copy
import subprocess
import sys

import pytest
import yaml

from residency.core import config

from conftest import ROOT


def default():
    return config.load(ROOT / "config" / "config.yaml")


def test_embedded_default_is_valid():
    assert default()["pager_synthetic"]["main"]["arms"]


def test_paper_config_needs_the_users_model():
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    with pytest.raises(config.ConfigError, match=r"pager_model.models\[0\]: 'user:qwen2.5-3b-instruct-q4_k_m' is not declared"):
        config.validate(paper)
    paper["models"]["user"] = [{"name": "qwen2.5-3b-instruct-q4_k_m", "path": "/data/q.gguf", "sha256": "0" * 64}]
    config.validate(paper)


def test_a_user_certificate_model_must_be_declared():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["certificate"]["model"] = "user:mine"
    with pytest.raises(config.ConfigError, match=r"^config error: certificate.model: 'user:mine' is not declared"):
        config.validate(cfg)
    cfg["models"]["user"] = [{"name": "mine", "path": "/data/m.gguf", "sha256": "0" * 64}]
    config.validate(cfg)


@pytest.mark.parametrize("mutate, needle", [
    (lambda c: c["pager_synthetic"].update(regoin_bytes=1), "pager_synthetic: unknown key 'regoin_bytes'"),
    (lambda c: c["pager_synthetic"]["main"]["ratios"].append(1.5), "pager_synthetic.main.ratios[5]"),
    (lambda c: c["pager_synthetic"]["main"]["arms"].append("pager-magic"), "pager_synthetic.main.arms[4]"),
    (lambda c: c["pager_synthetic"].update(chunk_bytes=1000), "pager_synthetic.chunk_bytes"),
    (lambda c: c["harness"].pop("cgroup"), "harness: 'cgroup' is a required property"),
    (lambda c: c.update(extra=1), "(top level): unknown key 'extra'"),
    (lambda c: c["matched_source"].update(threads=0), "matched_source.threads"),
    (lambda c: c["matched_source"].pop("threads"), "matched_source: 'threads' is a required property"),
    (lambda c: c["matched_source"].update(reserve_bytes=1 << 24), "matched_source.reserve_bytes: no longer a setting"),
    (lambda c: c["harness"].update(overhead_margin=-0.1), "harness.overhead_margin"),
])
def test_bad_config_one_line_naming_the_key(mutate, needle):
    c = copy.deepcopy(default())
    mutate(c)
    with pytest.raises(config.ConfigError) as info:
        config.validate(c)
    msg = str(info.value)
    assert needle in msg
    assert "\n" not in msg and msg.startswith("config error: ")


def test_cli_and_snakemake_reject_bad_config(tmp_path):
    c = default()
    c["pager_synthetic"]["passes"] = 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(c))
    cli = subprocess.run([sys.executable, "-m", "residency.cli", "validate-config", str(bad)],
                         capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode == 2
    assert cli.stderr.strip().splitlines() == [
        "residency: error: config error: pager_synthetic.passes: 1 is less than the minimum of 2"]
    smk = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(bad)],
                         capture_output=True, text=True, cwd=ROOT)
    assert smk.returncode != 0
    assert "config error: pager_synthetic.passes: 1 is less than the minimum of 2" in smk.stderr


def test_missing_config_file(tmp_path):
    with pytest.raises(config.ConfigError, match="file not found"):
        config.load(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path, text, want", [
    (("pager_model", "ratios", 0), "0.45", 0.45),        # a number
    (("pager_synthetic", "passes"), "3", 3),             # an integer
    (("pager_synthetic", "eager_reconcile"), "true", True),  # a boolean
])
def test_strings_from_the_command_line_reach_the_schema_as_what_they_spell(path, text, want):
    c = default()
    node = c
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = text
    assert config.validate(c) is c
    assert node[path[-1]] == want and type(node[path[-1]]) is type(want)


@pytest.mark.parametrize("path, text", [
    (("pager_synthetic", "passes"), "true"),      # a boolean is not an integer
    (("pager_synthetic", "passes"), "2.5"),       # nor a fraction
    (("pager_synthetic", "eager_reconcile"), "1"),  # an integer is not a boolean
    (("pager_model", "ratios", 0), "half"),
])
def test_a_string_that_spells_no_such_value_is_still_refused_in_one_line(path, text):
    c = default()
    node = c
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = text
    with pytest.raises(config.ConfigError) as exc:
        config.validate(c)
    assert "\n" not in str(exc.value) and str(exc.value).startswith("config error: " + ".".join(map(str, path[:2])))


def test_a_numeric_config_override_works_on_the_command_line():
    smk = subprocess.run([sys.executable, "-m", "snakemake", "-n", "figures", "--cores", "1", "--config",
                          'pager_model={"ratios": [0.5]}'], capture_output=True, text=True, cwd=ROOT)
    assert "is not of type" not in smk.stdout + smk.stderr, smk.stderr[-2000:]
    assert smk.returncode == 0, smk.stderr[-2000:]
