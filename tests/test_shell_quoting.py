"""No shell ever parses a value that came from a config: every interpolation in every rule's
`shell:` is quoted (`{...:q}`; a list-valued param is quoted element by element, so a flag
builder's argument list stays one argument per element), and no Python of the pipeline runs a
command through a shell. Each check has a negative control, so it cannot pass vacuously.
tests/test_hostile_paths.py runs the pipeline on a model path a shell would execute."""

import ast
import os
import string
from pathlib import Path

import pytest

from conftest import ROOT

# Python that builds or runs commands: the package, the benchmarks, the workflow's scripts.
PYTHON_DIRS = [ROOT / "workflow", ROOT / "bench"]
SHELL_CALLS = {("os", "system"), ("os", "popen"), ("subprocess", "getoutput"), ("subprocess", "getstatusoutput")}


def unquoted_fields(template: str) -> list[str]:
    """The fields of a Snakemake shell template that the shell would see unquoted (no `:q`)."""
    return [field for _, field, spec, _ in string.Formatter().parse(template)
            if field is not None and not (spec or "").endswith("q")]


def shell_uses(source: str) -> list[int]:
    """Lines of Python source that hand a command to a shell: shell=True, os.system, os.popen."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        if any(k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
               for k in node.keywords):
            lines.append(node.lineno)
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in SHELL_CALLS:
            lines.append(node.lineno)
    return lines


def test_the_checks_find_what_they_look_for():
    """Negative controls: an unquoted field, a quoted one, a literal brace; shell=True and os.system."""
    assert unquoted_fields("x {input.model} --p {params.prompt:q} {{literal}} 2> {log}") == ["input.model", "log"]
    assert unquoted_fields("x {params.gen:q} {output.gguf:q}") == []
    src = "import os, subprocess\nsubprocess.run(c, shell=True)\nos.system(c)\nsubprocess.run([a, b])\n"
    assert shell_uses(src) == [2, 3]


@pytest.fixture(scope="module")
def workflow_rules():
    """The workflow's rules as Snakemake parses them from the Snakefile (the embedded default
    config), each with its shell template after the includes and constants are resolved."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
            wf = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(),
                              storage_settings=StorageSettings(), snakefile=ROOT / "Snakefile", workdir=ROOT)
            return {r.name: r.shellcmd for r in wf._workflow.rules}
    finally:
        os.chdir(cwd)


def test_every_interpolation_in_every_shell_rule_is_quoted(workflow_rules):
    shells = {name: cmd for name, cmd in workflow_rules.items() if cmd}
    # every run cell and every derived output is a shell rule: the check reads all of them
    assert len(shells) >= 60 and {"pager_model_cell", "model_user", "claim", "engine"} <= set(shells), sorted(shells)
    bad = {name: unquoted_fields(cmd) for name, cmd in shells.items() if unquoted_fields(cmd)}
    assert not bad, f"unquoted interpolations (add :q; pass several arguments as a list): {bad}"


def test_no_python_of_the_pipeline_runs_a_command_through_a_shell():
    files = [p for d in PYTHON_DIRS for p in d.rglob("*.py")]
    assert len(files) > 50
    bad = {str(p.relative_to(ROOT)): shell_uses(p.read_text()) for p in files if shell_uses(p.read_text())}
    assert not bad, bad
