"""Every command in README.md works as written: each cheap one runs as written, each that
would start a campaign runs as its dry run (-n), the benchmarks run at a tiny size; a command
the test does not know how to run fails the test, so the README cannot grow an untested one.
Bad command lines give one line, not a traceback.

Commands run in the tiny campaign's working directory (the `campaign` fixture, with the
repository's Snakefile, workflow and profiles linked in), so the "afterwards" commands find
the claims they check."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, engine_build_dir

pytestmark = pytest.mark.integration

README = ROOT / "README.md"
SETUP = {"make figures", "make test"}  # the two set-up commands: they are what the suite itself runs
PROGRAMS = ("make ", "snakemake ", "residency ", "residctl ", "bench/", "engine/bench/", "workflow/scripts/",
            ". .venv/", "mount ", "echo ")
NOT_RUN: dict[str, str] = {  # command -> why it is not run (asserted to be in the README, so the list stays true)
    # Empty today: the commands that change the machine (a hugetlbfs mount, huge pages) moved
    # to docs/benchmarks.md, whose commands this test does not run.
}


def readme_commands(text: str) -> dict[str, str]:
    """Command -> "block" (a line of an indented code block) or "inline" (a code span in the
    text that starts with a program), without trailing comments, in README order, each once
    (a command in a block counts as a block command)."""
    found, prev_blank, in_block = {}, True, False
    for line in text.splitlines():
        in_block = bool(line.startswith("    ") and line.strip() and (in_block or prev_blank))
        if in_block and line.strip().startswith(PROGRAMS):
            found[re.split(r"\s+#\s", line.strip())[0].strip()] = "block"
        elif not line.startswith("    "):
            for span in re.findall(r"`([^`\n]+)`", line):
                if span.startswith(PROGRAMS) and not span.endswith("/"):
                    found.setdefault(span, "inline")
        prev_blank = not line.strip()
    return found


COMMANDS = readme_commands(README.read_text())


@pytest.fixture(scope="module")
def where(campaign):
    """The campaign's directory with the repository linked in, like a clone after `make figures`."""
    work, env = campaign
    for name in ("Snakefile", "workflow", "profiles", "bench", "config/paper.yaml"):
        if not (work / name).exists():
            (work / name).symlink_to(ROOT / name)
    return work, env


def _dry(cmd: str) -> str:
    return cmd.replace("snakemake ", "snakemake -n ", 1)


def how_to_run(cmd: str, work: Path) -> tuple[str, Path]:
    """(the shell command to run, where): as written, or its dry run, or at a tiny size; a
    subcommand named in the text (`residency run`, `residctl stream ...`) must answer --help."""
    residctl = Path(engine_build_dir(work)) / "residctl"  # the engine the campaign ran
    if COMMANDS.get(cmd) == "inline" and cmd.startswith(("residency ", "residctl ")):
        prog, sub = cmd.split()[:2]
        return f"{residctl if prog == 'residctl' else prog} {sub} --help", work
    if cmd.startswith("snakemake ") and "--report" in cmd:
        return cmd, work  # the report: cheap, made from what the campaign left
    if cmd.startswith("snakemake "):
        return _dry(cmd), work
    if cmd.startswith("make "):
        return f"make -n {cmd[5:]}", ROOT  # the target exists and its recipe expands
    if cmd.startswith("residency summary ") and cmd.endswith("docs/results.md"):
        # The campaign's own results page: a copy of the repository's, its measured section
        # rewritten from the campaign's records first, so --check has a section that matches.
        results = work / "docs" / "results.md"
        if not results.exists():
            results.parent.mkdir(exist_ok=True)
            results.write_text((ROOT / "docs" / "results.md").read_text())
        return ("residency summary --update docs/results.md && " + cmd if "--check" in cmd else cmd), work
    if cmd.startswith("residency "):
        return cmd, work
    if cmd == ". .venv/bin/activate":
        return f". {ROOT}/.venv/bin/activate && command -v snakemake residency", ROOT
    if cmd.split()[0] == "bench/pager_model.py":  # as written (all sections, or --skip-1-4), at a tiny size
        return (f"{cmd} --residctl {residctl} --model results/models/synthetic-dense.gguf --reps 1 --tokens 4"
                " --roofline-reps 1"), work
    if cmd == "bench/consumption.py":
        return (f"{cmd} --residctl {residctl} --model results/models/synthetic-dense.gguf --reps 1 --tokens 4"
                " --ratios 0.5 --chunks 65536"), work
    if cmd == "bench/pager_nice.py":
        return f"{cmd} --residctl {residctl} --model results/models/synthetic-dense.gguf --pairs 1 --tokens 4", work
    if cmd == "bench/matched_overlap.py":
        return f"{cmd} --residctl {residctl} --config config/config.yaml --pairs 2", work
    if cmd == "engine/bench/stream_vs_fio.sh":
        return (f"{ROOT}/{cmd} --residctl {residctl} --file {work}/bench-region.bin --size 8388608 --reps 3"
                f" --out {work}/bench-stream"), work
    if cmd.startswith("workflow/scripts/cluster.sh"):
        return f"{ROOT}/workflow/scripts/cluster.sh env", ROOT  # start/stop: tests/test_cluster.py
    raise LookupError(cmd)


def test_the_readme_lists_the_setup_commands_and_the_skipped_ones():
    assert SETUP <= set(COMMANDS), COMMANDS
    assert set(NOT_RUN) <= set(COMMANDS), set(NOT_RUN) - set(COMMANDS)


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c not in SETUP and c not in NOT_RUN])
def test_readme_command_works_as_written(cmd, where):
    work, env = where
    try:
        shell, cwd = how_to_run(cmd, work)
    except LookupError:
        pytest.fail(f"README command {cmd!r}: the test does not know how to run it (add it to how_to_run)")
    p = subprocess.run(["bash", "-c", shell], cwd=cwd, capture_output=True, text=True, env=env, timeout=900)
    out = p.stdout + p.stderr
    if "--configfile config/paper.yaml" in cmd:
        # As the README says: without your copy of the Qwen GGUF listed, validation names the entry.
        assert p.returncode != 0 and "Traceback" not in out, out[-2000:]
        assert out.strip().splitlines()[-1].startswith("config error: pager_model.models"), out[-2000:]
        return
    assert p.returncode == 0, f"{shell}\n{out[-3000:]}"
    assert "Traceback" not in out, out[-3000:]


def _paper_config_with(work: Path, model: Path) -> Path:
    """config/paper.yaml with a stand-in GGUF listed under models.user, as the README asks."""
    cfg = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    name = cfg["pager_model"]["models"][0].split(":", 1)[1]
    cfg.setdefault("models", {})["user"] = [
        {"name": name, "path": str(model), "sha256": hashlib.sha256(model.read_bytes()).hexdigest()}]
    out = work / "paper-with-model.yaml"
    out.write_text(yaml.safe_dump(cfg))
    return out


@pytest.mark.parametrize("profile", ["workflow/profiles/default", "workflow/profiles/slurm"])
def test_paper_scale_dry_run_once_the_model_is_listed(profile, where):
    work, env = where
    cfg = _paper_config_with(work, work / "results" / "models" / "synthetic-dense.gguf")
    cmd = ["snakemake", "-n", "--profile", profile, "--workflow-profile", "none", "figures", "--configfile", str(cfg)]
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert "pager_model_cell" in out and "matched_source_cell" in out, out[-3000:]


BAD = [  # (a bad command line, where, a fragment its one line must have)
    ("make figures CONFIG='config/paper.yaml figures'", "root", "no config file 'config/paper.yaml figures' (a target?"),
    ("make figures CONFIG=config", "root", "'config' is a folder, not a config file"),
    ("make figures CONFIG=config/nope.yaml", "root", "no config file 'config/nope.yaml'"),
    ("make figures PROFILE=workflow/profiles/nope", "root", "is not a Snakemake profile"),
    ("residency verify --claim P99", "work", "P99"),
    ("RESIDCTL scan --region nowhere.bin --out x --arm pager-lru", "work", "nowhere.bin"),
    ("snakemake -n figures --configfile bad.yaml", "work", "pager_model.tokens"),
]


@pytest.mark.parametrize("cmd,cwd,fragment", BAD)
def test_a_bad_command_line_gives_one_line(cmd, cwd, fragment, where):
    work, env = where
    (work / "bad.yaml").write_text("pager_model:\n  tokens: -3\n")
    cmd = cmd.replace("RESIDCTL", str(Path(engine_build_dir(work)) / "residctl"))
    p = subprocess.run(["bash", "-c", cmd], cwd=ROOT if cwd == "root" else work, capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode != 0, p.stdout + p.stderr
    errors = [l for l in p.stderr.splitlines() if l.strip() and not l.startswith(("Using workflow", "Config file"))]
    assert len(errors) == 1 and fragment in errors[0], p.stderr
