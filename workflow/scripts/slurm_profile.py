#!/usr/bin/env python3
"""Write the slurm profile's set-resources (workflow/profiles/slurm/config.yaml, its last
section) from the study registry (workflow/residency/campaigns/studies.py): every study's
run rule asks for a whole node. `--check`: write nothing, exit 1 when the profile differs.

    .venv/bin/python workflow/scripts/slurm_profile.py [--check]
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "config.yaml"
sys.path.insert(0, str(ROOT / "workflow"))

from residency.campaigns import studies  # noqa: E402

KEY = "set-resources:\n"


def section() -> str:
    """The set-resources section, in the registry's order."""
    lines = [KEY]
    for rule, resources in studies.slurm_set_resources().items():
        lines.append(f"  {rule}:\n")
        lines += [f'    {k}: "{v}"\n' for k, v in resources.items()]
    return "".join(lines)


def main(argv: list[str]) -> int:
    text = PROFILE.read_text()
    if KEY not in text:
        print(f"{PROFILE}: no {KEY.strip()} section", file=sys.stderr)
        return 2
    want = text[:text.index(KEY)] + section()
    if "--check" in argv:
        if want != text:
            print(f"{PROFILE}: set-resources is not the registry's (run {Path(__file__).relative_to(ROOT)})",
                  file=sys.stderr)
            return 1
        return 0
    PROFILE.write_text(want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
