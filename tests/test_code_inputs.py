"""An output's code inputs come from the import graph (residency.core.imports, cli.code_of):
the modules its command's handler imports and everything they import, so a change two or
three imports deep remakes it and a change elsewhere does not."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from residency import cli
from residency.core import imports

PKG = imports.PACKAGE_DIR


def rel(files):
    return {str(Path(f).relative_to(PKG)) for f in files}


def test_a_module_three_imports_deep_is_a_code_input_and_a_sibling_study_is_not():
    # gather.pager -> evidence.exactness -> evidence.demand -> evidence.extents
    assert {"gather/pager.py", "evidence/exactness.py", "evidence/demand.py", "evidence/extents.py"} \
        <= rel(cli.code_of("gather", "pager-model"))
    assert not {"gather/faults.py", "gather/reclaim.py", "render/tables.py"} & rel(cli.code_of("gather", "pager-model"))
    assert "evidence/extents.py" not in rel(cli.code_of("gather", "reclaim"))


def test_a_claim_depends_on_its_own_module_not_its_siblings():
    c2 = rel(cli.code_of("claim", "C2"))
    assert {"claims/c2.py", "claims/__init__.py", "analysis/stats.py", "analysis/pairs.py"} <= c2
    assert not {"claims/p1.py", "claims/c8.py"} & c2
    assert "analysis/roofline.py" in rel(cli.code_of("claim", "P9"))


def test_every_choice_of_a_dispatched_command_has_its_handler():
    """A table's handler is cli's _table_<choice>; a gather's is the registry's command."""
    sub = next(a for a in cli.parser()._actions if a.dest == "command").choices
    for command in ("gather", "table"):
        study = next(a for a in sub[command]._actions if a.dest in ("study", "table"))
        for choice in study.choices:
            g = cli._registered_gather(choice) if command == "gather" else None
            assert callable(imports.resolve(g.command) if g else cli._handler(command, choice)), (command, choice)
            assert cli.code_of(command, choice), (command, choice)


def test_closure_follows_lazy_imports_and_stops_at_the_package(tmp_path):
    # a function body's import counts: gather.base imports trace and llama_build lazily
    base = rel(imports.files(imports.closure({"residency.gather.base"})))
    assert {"core/trace.py", "inputs/llama_build.py"} <= base
    assert all(not f.startswith("..") for f in base)


RUNTIME = """
import json, sys
from residency import cli
try:
    cli.main(sys.argv[1:])
except BaseException:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("residency"))))
"""


@pytest.mark.parametrize("argv, code", [
    (["gather", "pager-model", "--out", "OUT/t.parquet", "--oracle", "OUT/o", "--model-identity", "OUT/m.json",
      "OUT/run"], ("gather", "pager-model")),
    (["gather", "faults", "--prespecified", "[]", "--out", "OUT/t.parquet", "OUT/run"], ("gather", "faults")),
    (["table", "table7-faults", "--runs", "OUT/f.parquet", "--out-stem", "OUT/t"], ("table", "table7-faults")),
    (["claim", "C2", "--settings", "{}", "--protocol", "{}", "--root", "OUT"], ("claim", "C2")),
])
def test_what_a_command_really_imports_is_among_its_code_inputs(tmp_path, argv, code):
    """Run the command (it fails on its missing inputs, after its imports) and compare the
    residency modules it loaded with the static closure."""
    loaded, static = _loaded_and_static(tmp_path, argv, code)
    assert loaded & static, "the command loaded none of its code inputs (did it run?)"
    assert not _unlisted(loaded, static, code), f"{code}: loaded but not a code input"


def test_the_runtime_comparison_finds_a_module_the_closure_left_out(tmp_path):
    """The negative control: drop exactness from gather pager-model's closure, and the
    comparison names it."""
    argv, code = ["gather", "pager-model", "--out", "OUT/t.parquet", "--oracle", "OUT/o", "--model-identity",
                  "OUT/m.json", "OUT/run"], ("gather", "pager-model")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "harness.json").write_text("{}")
    (tmp_path / "m.json").write_text("{}")
    loaded, static = _loaded_and_static(tmp_path, argv, code)
    assert "residency.evidence.exactness" in loaded, "the gather never reached its oracle comparison"
    assert _unlisted(loaded, static - {"residency.evidence.exactness"}, code) == {"residency.evidence.exactness"}


def _loaded_and_static(tmp_path, argv, code):
    argv = [a.replace("OUT", str(tmp_path)) for a in argv]
    out = subprocess.run([sys.executable, "-c", RUNTIME, *argv], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    return loaded, {n for n, p in imports.modules().items() if str(p) in set(cli.code_of(*code))}


def _unlisted(loaded: set, static: set, code) -> set:
    """Loaded modules that are not code inputs, beyond those loaded without running for this
    command: the subcommands the parser registers, the study registry it lists the gathers
    from (what it imports, not the functions it names) and the resolver of those names,
    packages, and (a claim) the sibling claims the claim registry imports to list them."""
    ignore = imports.closure(cli.REGISTERED_BY.values()) | {"residency.cli", "residency.core.imports"}
    ignore |= imports.closure({"residency.campaigns.studies"}, references=False)
    ignore |= {m for m in loaded if imports.modules()[m].name == "__init__.py" and m != "residency.claims"}
    if code[0] == "claim":
        own = f"residency.claims.{code[1].lower()}"
        ignore |= imports.closure({m for m in imports.modules() if cli.CLAIM_MODULE.match(m)} - {own})
    return loaded - static - ignore
