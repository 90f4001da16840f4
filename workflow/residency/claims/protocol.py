"""The prespecified protocol of a claim: the campaign design its evidence was made under.

A claim's thresholds are its `settings` (the config's `claims:` section). Its protocol is
the rest of what was fixed in the config before the runs and decides what the evidence
is: the config section of every campaign its Parquet inputs come from (arms, ratios,
repetitions, pairs, tokens, ...) and the harness section (calibration repetitions, the
cgroup mode). Both are recorded in the claim record, so a reader sees what was decided
before the data and a change of design shows in the record's digest and its history.
"""

from __future__ import annotations

from pathlib import Path

# Campaigns that borrow another campaign's design: the matched source campaign runs the
# model, prompt and token count of pager_model; the reclaim cells the synthetic study's
# region, chunk size, source and calibration; the fault cells the prompt of pager_model; the
# task runs its model, threads, chunk size and source.
ALSO_USES = {"matched_source": ("pager_model",), "reclaim": ("pager_synthetic",),
             "faults": ("pager_model",), "tasks": ("pager_model",)}


def campaigns_of(input_paths: list[str], config: dict) -> tuple[list[str], list[str]]:
    """(config sections the inputs come from, inputs that name no section). A table belongs
    to the section its file name starts with (results/pager_synthetic_opt.parquet ->
    pager_synthetic); the longest matching section name wins."""
    sections = sorted((k for k, v in config.items() if isinstance(v, dict)), key=len, reverse=True)
    found, orphans = [], []
    for p in input_paths:
        if not p.endswith(".parquet"):
            continue
        stem = Path(p).stem
        hit = next((s for s in sections if stem == s or stem.startswith(s + "_")), None)
        if hit is None:
            orphans.append(p)
            continue
        for s in (hit, *ALSO_USES.get(hit, ())):
            if s not in found:
                found.append(s)
    return sorted(found), orphans


def of(config: dict, input_paths: list[str]) -> dict:
    """The protocol record of a claim with these inputs."""
    sections, orphans = campaigns_of(input_paths, config)
    doc = {"harness": config.get("harness"), "campaigns": {s: config[s] for s in sections}}
    if orphans:
        doc["inputs_without_campaign"] = orphans
    return doc
