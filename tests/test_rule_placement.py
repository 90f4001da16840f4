"""Where rules run on a cluster (the Snakefile's placement): every run cell, and only run
cells, gets a whole node in the slurm profile; every rule the placement names exists."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def rules() -> dict[str, str]:
    """{rule name: its text} of every rule of the Snakefile and the rule files."""
    found = {}
    for f in [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
        for block in re.split(r"(?m)^(?=rule |use rule )", f.read_text()):
            m = re.match(r"rule (\w+):", block) or re.match(r"use rule \w+ as (\w+) with:", block)
            if m:
                found[m.group(1)] = block
    return found


def run_cell_rules() -> set[str]:
    """The rules whose job runs a harness (`residency run`): the run cells."""
    return {name for name, text in rules().items() if re.search(r'"residency run ', text)}


def test_the_slurm_profile_gives_every_run_cell_and_only_those_a_whole_node():
    cells = run_cell_rules()
    profile = yaml.safe_load((ROOT / "workflow" / "profiles" / "slurm" / "config.yaml").read_text())
    exclusive = {r for r, res in profile["set-resources"].items() if "--exclusive" in str(res.get("slurm_extra"))}
    assert cells and exclusive == cells, f"cells without a node: {cells - exclusive}; not cells: {exclusive - cells}"


def snakefile_node_rules() -> set[str]:
    """The Snakefile's own NODE_RULES (the studies add theirs: studies.node_rules())."""
    text = (ROOT / "Snakefile").read_text()
    start = text.index("NODE_RULES = {")
    return set(re.findall(r'"(\w+)"', text[start:text.index("}", start)]))


def test_the_node_rules_exist_and_none_is_a_run_cell():
    node = snakefile_node_rules()
    known = rules()
    assert node and node <= set(known), f"unknown rules in NODE_RULES: {node - set(known)}"
    assert not [n for n in node if '"residency run ' in known[n]]
