"""The pipeline on values a shell would execute: the tiny pipeline, shrunk to one cell per
arm, in a working directory, an engine build directory and two user GGUFs (the primary model
of every real-model study, the certificate's and the fault campaign's MoE) whose paths hold
a space, both quotes, `;`, `$(...)` and a backtick, and prompts that hold the same. Every
step of `figures` must run and record the paths as given, and nothing the payloads name may
exist afterwards: had a shell parsed one of them, it would have made the marker."""

import json

import pytest
import yaml

from conftest import ROOT, engine_build_dir, snakemake, tiny_config

pytestmark = pytest.mark.integration

MARKER = "PWNED"
# Each payload, parsed by a shell, makes MARKER in the shell's working directory.
HOSTILE = f"it's a \"dir\"; $(touch {MARKER}) `touch {MARKER}`"
PROMPT = f"'a' \"b\"; $(touch {MARKER}) `touch {MARKER}`"  # short: the synthetic models' context is 64 bytes
# Every rule that passes a model path (or a prompt) to a program: each must have run.
MODEL_RULES = {"model_user", "model_user_inventory", "model_content_digests", "pager_model_graph_plan",
               "pager_model_calibrate_run", "pager_model_cell", "pager_model_baseline", "pager_model_roofline_run",
               "matched_source_cell", "certificate_cell", "fault_cell", "tasks_calibrate_run", "task_cell",
               "cache_transfer_cell", "speculative_draft", "speculative_cell"}


def user_model(cfg: dict, variant: str, where) -> dict:
    """The configured synthetic model of `variant`, written to a path of the user's."""
    from residency.inputs import gguf_synth

    spec = gguf_synth.spec_from_config(cfg["models"]["synthetic"], variant)
    rec = gguf_synth.write(spec, where / f"{variant} model.gguf")
    return {"name": variant, "path": str(where / f"{variant} model.gguf"), "sha256": rec["sha256"]}


def engine_dir(work) -> str:
    """The engine the tests built, reached through a hostile link; else built there by the rule."""
    built = engine_build_dir(work)
    link = work / f"engine {HOSTILE}"
    if built.startswith(str(ROOT)):
        link.symlink_to(built, target_is_directory=True)
    return str(link)


def hostile_config(work) -> dict:
    cfg = tiny_config(engine_dir(work))
    models = work / f"models {HOSTILE}"
    models.mkdir()
    cfg["models"]["user"] = [user_model(cfg, "dense", models), user_model(cfg, "moe", models)]
    cfg["harness"]["overhead_reps"] = 3  # the least that shows a spread (the schema says so)
    ps = cfg["pager_synthetic"]
    ps["main"].update(ratios=[0.75], reps=1)
    ps["stress"].update(compute_us=[0], reps=1)
    cfg["pager_model"].update(models=["user:dense"], prompt=PROMPT, ratios=[0.75], reps=1, baseline_reps=1,
                              roofline_reps=1)
    cfg["certificate"]["model"] = "user:moe"
    cfg["faults"].update(adapters=["user:moe", "user:dense"], cells=["none", "short-read"], c3_second_adapter=["none"])
    cfg["tasks"]["n"] = 1
    cfg["reclaim"]["reps"] = 1
    cfg["cache_transfer"].update(model="user:dense", prompts=[PROMPT])
    cfg["speculative"].update(model="user:dense", prompt=PROMPT)
    return cfg


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile") / f"work {HOSTILE}"
    work.mkdir()
    (work / "engine").symlink_to(ROOT / "engine")
    (work / "config").mkdir()
    cfg = hostile_config(work)
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(work, "figures", "--cores", "2", "--resources", "storage_exclusive=1")
    return work, cfg, proc


def test_every_step_runs_on_hostile_paths_and_prompts(hostile):
    work, _, proc = hostile
    assert proc.returncode == 0, proc.stderr[-4000:]
    ran = {line.split()[0] for line in proc.stdout.splitlines() + proc.stderr.splitlines()
           if len(line.split()) == 2 and line.split()[1].isdigit()}  # Snakemake's job stats: "<rule> <count>"
    assert MODEL_RULES <= ran, sorted(MODEL_RULES - ran)
    again = snakemake(work, "-n", "figures", "--cores", "1")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stderr[-2000:]


def test_no_payload_was_executed(hostile):
    work, _, _ = hostile
    found = [p for p in [*work.parent.rglob(MARKER), *ROOT.rglob(MARKER)]]
    assert not found, found


def test_the_runs_read_the_paths_and_prompts_as_given(hostile):
    work, cfg, proc = hostile
    assert proc.returncode == 0, proc.stderr[-2000:]
    dense = cfg["models"]["user"][0]["path"]
    ident = json.loads((work / "results/models/user/dense.json").read_text())
    assert ident["path"] == dense and ident["sha256"] == cfg["models"]["user"][0]["sha256"]
    runs = list((work / "results/runs/pager_model/dense").glob("*/r0.75/rep1/run.json"))
    assert len(runs) == 4
    for r in runs:
        h = json.loads((r.parent / "harness.json").read_text())
        argv = h["argv"]
        assert argv[argv.index("--model") + 1] == dense and argv[argv.index("--prompt") + 1] == PROMPT, argv
    cert = json.loads((work / "results/runs/certificate/certified/harness.json").read_text())["argv"]
    assert cert[cert.index("--model") + 1] == cfg["models"]["user"][1]["path"]


def test_a_hostile_model_name_is_refused_in_one_line(hostile, tmp_path):
    work, cfg, _ = hostile
    bad = tmp_path / "bad.yaml"
    user = [dict(cfg["models"]["user"][0], name="x;$(touch PWNED)")]
    bad.write_text(yaml.safe_dump({"models": {"user": user}}))
    p = snakemake(work, "-n", "figures", "--configfile", str(bad))
    errors = [line for line in p.stderr.splitlines() if line.strip() and not line.startswith(("Config file", "Using workflow"))]
    assert p.returncode != 0 and len(errors) == 1 and "models.user[0].name" in errors[0], p.stderr[-2000:]
    assert not list(work.rglob(MARKER))
