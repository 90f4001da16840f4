"""A study is one registered unit (residency/campaigns/studies.py): every consumer reads the
registry: the CLI's gather choices, options and handlers, the progress counts, the deep
re-gather and its schemas, the rules' placement and the slurm profile. The negative
controls: a study declared in a test-local registry reaches each of them, and a run rule
the registry does not declare stops the Snakefile."""

import importlib
import importlib.util
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT, pipeline_env
from residency import claims, cli
from residency.campaigns import cells, progress, studies
from residency.core import imports
from test_rule_placement import rules, run_cell_rules


def _config(models=None) -> dict:
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    if models:
        cfg["pager_model"]["models"] = models
    return cfg


def _choices(command: str) -> list[str]:
    sub = next(a for a in cli.parser()._actions if a.dest == "command").choices[command]
    return next(a for a in sub._actions if a.dest in ("study", "table")).choices


def _profile_check() -> int:
    spec = importlib.util.spec_from_file_location("slurm_profile", ROOT / "workflow" / "scripts" / "slurm_profile.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script.main(["--check"])


def test_the_gather_choices_options_and_code_inputs_are_the_registrys():
    gathers = studies.gathers()
    assert list(_choices("gather")) == sorted(gathers)
    for name, g in gathers.items():
        assert set(g.needs + g.takes) <= set(studies.GATHER_OPTIONS), name
        assert callable(imports.resolve(g.command)), name
        assert str(imports.modules()[imports.module_of(g.command)]) in cli.code_of("gather", name)


def test_every_gather_command_takes_the_arguments_the_cli_gives_it():
    """The CLI calls a command with run_dirs, out and each option the gather declares, by
    keyword; a command whose parameters do not take exactly those fails here, not in a campaign."""
    import inspect

    for name, g in studies.gathers().items():
        params = inspect.signature(imports.resolve(g.command)).parameters
        given = {"run_dirs", "out", *g.needs, *g.takes}
        assert set(params) == given, f"{name}: {g.command} takes {sorted(params)}, the CLI gives {sorted(given)}"


def test_a_gathered_table_is_written_through_the_cli(tmp_path, monkeypatch):
    """One gather whose command's parameters are not in (run_dirs, out) order, end to end through
    the CLI's handler with a stand-in command (the negative control of the call's form)."""
    seen = {}

    def command(run_dirs, region_identity, out, llama_identity=None):
        seen.update(run_dirs=run_dirs, region_identity=region_identity, out=out, llama_identity=llama_identity)

    g = studies.gathers()["pager-synthetic"]
    real = imports.resolve
    monkeypatch.setattr(imports, "resolve", lambda ref: command if ref == g.command else real(ref))
    args = cli.parser().parse_args(["gather", "pager-synthetic", "--out", str(tmp_path / "t.parquet"),
                                    "--region-identity", "r.json", "run-a"])
    cli._gather(args)
    assert seen == {"run_dirs": ["run-a"], "region_identity": "r.json", "out": str(tmp_path / "t.parquet"),
                    "llama_identity": None}


def test_a_missing_option_a_gather_needs_is_one_line():
    with pytest.raises(SystemExit) as stop:
        cli.main(["gather", "speculative", "--out", "t.parquet", "run"])
    assert str(stop.value) == "residency: error: gather speculative needs --draft-identity"


def test_the_progress_counts_are_the_registrys_studies_and_their_further_models():
    cfg = _config(models=["smollm2", "synthetic-dense"])
    runs = progress.study_runs(cfg)
    per_model = [s for s in studies.STUDIES if s.per_model]
    assert list(runs) == [s.name for s in studies.STUDIES] + [f"{s.name} synthetic-dense" for s in per_model]
    assert all(runs[s.name] == s.runs(cfg) and runs[s.name] for s in studies.STUDIES)
    assert runs["pager_model synthetic-dense"] == per_model[0].runs(cells.model_view(cfg, "synthetic-dense"))


def test_the_deep_regather_and_the_schemas_are_the_registrys():
    from residency.gather import studies as gathered

    gathers = studies.gathers()
    assert gathered.TABLE_OF_STUDY == {n: imports.resolve(g.table) for n, g in gathers.items()}
    assert gathered.SCHEMA_OF_STUDY == {n: imports.resolve(g.schema) for n, g in gathers.items()}


def test_run_rules_are_the_run_cells_and_whole_node_slurm_jobs():
    assert set(studies.run_rules()) == run_cell_rules()
    assert len(studies.run_rules()) == len(set(studies.run_rules())), "a run rule declared twice"
    profile = yaml.safe_load((ROOT / "workflow" / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["set-resources"] == studies.slurm_set_resources()
    assert _profile_check() == 0
    known = rules()
    assert studies.node_rules() <= set(known) and not studies.node_rules() & run_cell_rules()


def test_every_claim_is_one_studys_and_reads_its_tables():
    declared = [c for s in studies.STUDIES for c in s.claims]
    assert sorted(declared) == sorted(claims.REGISTRY), "a claim no study declares, or one declared twice"
    for s in studies.STUDIES:
        for c in s.claims:
            stems = [p.rsplit("/", 1)[-1].removesuffix(".parquet") for p in claims.REGISTRY[c].INPUTS.values()]
            assert any(st == s.name or st.startswith(s.name + "_") for st in stems), (s.name, c, stems)


def test_every_paper_table_a_study_declares_is_a_table_command():
    declared = [t for s in studies.STUDIES for t in s.paper_tables]
    assert declared and set(declared) <= set(_choices("table"))


TOY = studies.Study("toy", lambda config: ["results/runs/toy/a/harness.json"], ("toy_cell",),
                    gathers=(studies.Gather("toy", "residency.gather.roofline:gather_roofline",
                                            "residency.gather.roofline:roofline_table",
                                            "residency.gather.roofline:SCHEMA", needs=("draft_identity",)),),
                    node_rules=("toy_draft",))


@pytest.fixture
def toy_registry(monkeypatch):
    """The registry with one more study, declared here; the deep map rebuilt from it."""
    from residency.gather import studies as gathered

    monkeypatch.setattr(studies, "STUDIES", studies.STUDIES + (TOY,))
    yield importlib.reload(gathered)
    monkeypatch.undo()
    importlib.reload(gathered)


def test_a_study_declared_in_a_test_registry_reaches_every_consumer(toy_registry):
    assert "toy" in _choices("gather")
    with pytest.raises(SystemExit, match="gather toy needs --draft-identity"):
        cli.main(["gather", "toy", "--out", "t.parquet", "run"])
    assert cli.code_of("gather", "toy") == cli.code_of("gather", "pager-model-roofline")
    assert progress.study_runs(_config())["toy"] == ["results/runs/toy/a/harness.json"]
    assert toy_registry.TABLE_OF_STUDY["toy"] is imports.resolve("residency.gather.roofline:roofline_table")
    assert "toy" in toy_registry.SCHEMA_OF_STUDY
    assert studies.slurm_set_resources()["toy_cell"] == {"slurm_extra": "'--exclusive'"}
    assert "toy_draft" in studies.node_rules()
    assert _profile_check() == 1, "the profile check passed a profile without the new run rule"


def test_a_run_rule_the_registry_does_not_declare_stops_the_snakefile(tmp_path):
    """The Snakefile places rules by the registry, and refuses a rule that runs a cell but is
    no study's run rule (it would run in the Snakemake process)."""
    shutil.copy(ROOT / "Snakefile", tmp_path)
    for d in ("workflow", "config"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (tmp_path / "engine").symlink_to(ROOT / "engine")  # the fault-cell table the config check reads
    reg = tmp_path / "workflow" / "residency" / "campaigns" / "studies.py"
    text = reg.read_text()
    assert text.count('("speculative_cell",)') == 1
    reg.write_text(text.replace('("speculative_cell",)', "()"))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "-s", str(tmp_path / "Snakefile"),
                           "-d", str(tmp_path)], capture_output=True, text=True, env=pipeline_env(), timeout=300)
    assert proc.returncode != 0
    assert "workflow error: speculative_cell: a rule runs `residency run` if and only if it is a study's run rule" \
        in proc.stderr, proc.stderr[-2000:]
