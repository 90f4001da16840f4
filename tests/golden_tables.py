"""The golden synthetic tables: regenerate the synthetic study's paper table at the fixed
config of tests/golden/config.yaml through Snakemake, keep its deterministic part, and
compare it byte for byte with tests/golden/pager-synthetic.csv.

The synthetic study in lockstep is deterministic in its counts: the pager's misses,
evictions and bytes are a function of the policy and the reference trace. What is not is
left out: timings and the cgroup's peak and limit (calibrated), arm A (the kernel's page
cache and read-ahead decide its misses), and arm E's demand misses (whether a prefetch has
landed when its chunk is accessed is timing); E's bytes and evictions are deterministic and
stay. A behaviour change shows as a diff; accepting it is a deliberate commit of the file
this writes:

    make golden        # = .venv/bin/python tests/golden_tables.py --update
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from residency import atomic

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
TABLE = "results/tables/pager-synthetic.csv"
COLUMNS = ["arm_row", "r", "reps", "ok", "capacity_chunks", "miss_rate", "misses", "opt_misses", "evictions",
           "bytes_per_pass", "opt_bytes_per_pass", "bytes_over_opt"]
TIMED_MISSES = ("E (prefetch)",)  # rows whose demand misses depend on timing
MISS_COLUMNS = ["miss_rate", "misses"]


def overlay(base: dict, top: dict) -> dict:
    """`top` laid over `base` key by key (nested sections merged, other values replaced)."""
    out = dict(base)
    for k, v in top.items():
        out[k] = overlay(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def golden_config(work: Path) -> dict:
    cfg = overlay(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()),
                  yaml.safe_load((GOLDEN / "config.yaml").read_text()))
    shared = ROOT / ".build" / "engine-test"  # the build `make test` made, else the pipeline's own
    cfg["engine"]["build_dir"] = str(shared if (shared / "residctl").exists() else work / ".build" / "engine")
    cfg["llama"]["build_dir"] = str(ROOT / ".build" / "llama.cpp")  # the cached pinned build
    return cfg


def regenerate(work: Path) -> Path:
    """Run the synthetic study's table through Snakemake in `work`; the table's path."""
    (work / "engine").symlink_to(ROOT / "engine")
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(golden_config(work)))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    cmd = [sys.executable, "-m", "snakemake", TABLE, "-s", str(ROOT / "Snakefile"), "-d", str(work),
           "--cores", "2", "--resources", "storage_exclusive=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError("snakemake failed:\n" + proc.stderr[-4000:])
    return work / TABLE


def deterministic_part(table_csv: Path) -> str:
    """The golden file's text: the table's deterministic columns, arm A's rows left out."""
    df = pd.read_csv(table_csv, dtype=str, keep_default_na=False)  # each cell as the table wrote it
    df = df[~df["arm_row"].str.startswith("A ")][COLUMNS].copy()
    df.loc[df["arm_row"].isin(TIMED_MISSES), MISS_COLUMNS] = ""
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def diff(got: str, want: str) -> str:
    return "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                        "tests/golden/pager-synthetic.csv", "regenerated"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write the regenerated table as the golden file")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        got = deterministic_part(regenerate(Path(tmp)))
    path = GOLDEN / "pager-synthetic.csv"
    if a.update:
        atomic.write_text(path, got)
        print(f"wrote {path.relative_to(ROOT)}: commit it with the change that explains it")
        return 0
    d = diff(got, path.read_text())
    print(d or "golden synthetic table: identical")
    return 1 if d else 0


if __name__ == "__main__":
    sys.exit(main())
