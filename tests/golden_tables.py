"""The golden paper tables: every paper table the pipeline makes, regenerated, its
deterministic part kept and compared cell by cell with tests/golden/<table>.csv.

The synthetic study's table (pager-synthetic) is regenerated at the fixed config of
tests/golden/config.yaml (no memory cgroup, more ratios than the tiny campaign); every other
table comes from the tiny pipeline of the integration tests (tests/conftest.py's `campaign`).
What is deterministic is declared per table in TABLES, in one place: its key columns (a row
is named by them), the columns compared, the columns left out with the reason for each (by
name, never by a tolerance), and the columns compared only in some rows (e.g. a claim's
verdict only where its assertions are on counts and exact comparisons). A column a table
gains that TABLES does not declare stops the comparison with its name.

A behaviour change shows as the cells it changed ("table, row key, column: want X got Y");
accepting it is a deliberate commit of the files this writes:

    make golden        # = .venv/bin/python tests/golden_tables.py --update
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from residency.core import atomic

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
TABLES_DIR = "results/tables"


class GoldenError(Exception):
    """A table that does not fit its declaration (an undeclared column, a repeated row key)."""


@dataclass(frozen=True)
class Rows:
    """`columns` compared only in the rows whose first key column is one of `keep`; blank in
    the others, for the reason `why`."""
    columns: tuple[str, ...]
    keep: frozenset[str]
    why: str


@dataclass(frozen=True)
class Table:
    key: tuple[str, ...]
    compared: tuple[str, ...]  # names, or fnmatch patterns for the tables whose columns are per r or per claim
    excluded: dict[str, str] = field(default_factory=dict)  # name or pattern -> why it is not compared
    only_in: tuple[Rows, ...] = ()
    left_out: dict[str, str] = field(default_factory=dict)  # first key's value of a row left out -> why
    campaign: bool = True  # from the tiny campaign (else from tests/golden/config.yaml's synthetic study)


# The claims whose verdict is a function of counts of exact lockstep arms, exact comparisons
# and the config: P1 (arm C misses every chunk), P4 (D = OPT, lockstep), P7 (D/OPT on the
# model, D's misses being exact), P10 (every arm E run completed and exact), P11 (exact
# against the mmap oracle), C3 (the deterministic fault cells' validators). Not these:
# P2 (D/A: the kernel's reads), P3 (the cgroup's reclaim counters), P5 (its racy half needs a
# race to happen), P6 (E's latency tail), P8 (arm C's faults handled, raced by the compute
# threads), P9 (tokens/s), C1, C4, C8, C11, C12 (a resource predicate on the cgroup's measured
# peak and events), C2, C5, C6, C7, C9, C10 (walls, cycles, bandwidth).
DETERMINISTIC_CLAIMS = frozenset({"P1", "P4", "P7", "P10", "P11", "C3"})
TIMED_VERDICT = "its verdict rests on timings or cgroup measurements (see DETERMINISTIC_CLAIMS)"

TIMING = "a timing"
PEAK = "the cgroup's measured peak"
LIMIT = "a limit calibrated on the machine"
# Found by the determinism check: arm C at the same 100 misses read 16 KiB more in one of 16 runs.
C_BYTES = "at the same misses one run of 16 read 16 KiB more (the compute threads' faults race its fills)"

TABLES: dict[str, Table] = {
    "pager-synthetic": Table(
        key=("arm_row", "r"),
        compared=("reps", "ok", "capacity_chunks", "miss_rate", "misses", "opt_misses", "evictions", "bytes_per_pass",
                  "opt_bytes_per_pass", "bytes_over_opt"),
        excluded={"wall_ms": TIMING, "peak_mib": PEAK, "limit_mib": LIMIT},
        only_in=(Rows(("miss_rate", "misses"), frozenset({"C (LRU)", "D (declared)"}),
                      "arm E's demand misses: whether a prefetch has landed when its chunk is accessed is timing"),),
        left_out={"A (kernel mmap)": "the kernel's page cache and read-ahead decide its misses"},
        campaign=False),
    "pager-model": Table(
        key=("arm_row", "r"),
        compared=("reps", "valid", "exact", "gb_per_run", "bytes_per_token_over_t", "misses", "opt_misses",
                  "misses_over_opt"),
        excluded={"tokens_per_s": TIMING, "fault_p99_us": TIMING, "peak_mib": PEAK, "limit_mib": LIMIT,
                  "roofline_tokens_per_s": "the machine's calibrated compute rate and bandwidth",
                  "fraction_of_roofline": "tokens/s over the machine's roofline"},
        only_in=(Rows(("misses", "misses_over_opt"), frozenset({"C (LRU)", "D (declared)"}),
                      "arm A's and the baseline's misses are the kernel's (page cache, read-ahead); arm E's demand "
                      "misses race its prefetch"),
                 Rows(("gb_per_run", "bytes_per_token_over_t"), frozenset({"D (declared)"}),
                      "arms A, E and the baseline as their misses; arm C's bytes: " + C_BYTES))),
    "table6-matched-pairs": Table(
        key=("Block",), compared=("Order",),
        excluded={"D (s)": TIMING, "F (s)": TIMING, "F/D": "a ratio of timings"}),
    "models": Table(
        key=("model",),
        compared=("architecture", "quant_types", "t_repr_bytes", "exact", "D/OPT r=*", "P7", "P10", "P11"),
        excluded={"D/A bytes r=*": "arm A's reads are the kernel's (page cache, read-ahead)",
                  "D/C bytes r=*": "arm C's bytes: " + C_BYTES, "* tok/s": TIMING,
                  "P2": "asserts D/A < 1 (arm A's reads)", "P6": "asserts arm E's latency tail (timing)",
                  "P8": "arm C's faults handled are raced by the compute threads (155 and 162 in two identical runs)",
                  "P9": "asserts tokens/s", "C9": "asserts walls and time to first token"}),
    "table3-principal": Table(
        key=("record",), compared=("exactness scope",),
        excluded={"campaign / system": "names the machine's hostname",
                  "resource authority": "the limits calibrated on the machine and its GPU grade",
                  "principal result": "the headline's walls, peaks and ratios of them",
                  "verdict": "C1's admission from the cgroup's peak and events, C2's walls, C8's peaks"}),
    "table4-identity": Table(
        key=("record",), compared=("workload / role", "adapter / source sha256", "plan sha256", "direct attribution"),
        excluded={"executable sha256": "the binary's digest: the compiler and its flags decide it, not the sources"}),
    "table5-certificate": Table(
        key=("field",), compared=("C1 instantiation",),
        only_in=(Rows(("C1 instantiation",), frozenset({"E", "L"}),
                      "I names the engine binary's digest, B, A the cgroup's measured peak and the machine's GPU, "
                      "classes the admissibility decided from them"),)),
    "table1-obligations": Table(
        key=("field",), compared=("obligation", "checks", "recorded", "verdict"),
        only_in=(Rows(("recorded",), frozenset({"E", "L"}),
                      "I's names the engine binary's digest, B, A's the cgroup's measured peak and the machine's GPU"),
                 Rows(("checks", "verdict"), frozenset({"I", "E", "L"}),
                      "B, A's resource contract is decided from the cgroup's measured peak and events"))),
    "table7-faults": Table(
        key=("mode",), compared=("invariant exercised", "required observation", "observed: *")),
    "table9-populations": Table(
        key=("record",), compared=("campaign", "correctness or utility scope"),
        excluded={"resource authority": "the limits calibrated on the machine",
                  "result": "the headline's tokens/s, cycles and walls",
                  "verdict": "C5, C6 and C7 compare walls (C5 and C6 flipped between two identical runs); C4 and "
                             "C12 rest on the cgroup's limit events"}),
    "table10-negative-results": Table(
        key=("record",), compared=("line",),
        excluded={"result": "the measured bandwidth and walls", "consequence": "follows from the verdict",
                  "verdict": "C10's decision from the measured bandwidth, C9's from walls"}),
    "table11-claim-map": Table(
        key=("ID",), compared=("headline family", "record", "verdict", "regenerate", "verify", "replay"),
        excluded={"sha256": "the record's digest: every record carries measured values"},
        only_in=(Rows(("verdict",), DETERMINISTIC_CLAIMS, TIMED_VERDICT),)),
    "reference-values": Table(
        key=("claim", "label"), compared=("reference", "this run", "pointer", "tested", "verdict"),
        only_in=(Rows(("this run", "tested", "verdict"), DETERMINISTIC_CLAIMS, TIMED_VERDICT),)),
}
CAMPAIGN_TABLES = [name for name, t in TABLES.items() if t.campaign]


def _matches(column: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(column, p) for p in patterns)


def deterministic_part(name: str, table_csv: Path) -> str:
    """The golden file's text of table `name`: its key and compared columns (in the table's
    order), the rows left out removed, the cells compared only in some rows blank elsewhere."""
    t = TABLES[name]
    df = pd.read_csv(table_csv, dtype=str, keep_default_na=False)  # each cell as the table wrote it
    undeclared = [c for c in df.columns if not _matches(c, (*t.key, *t.compared, *t.excluded))]
    if undeclared:
        raise GoldenError(f"{name}: column {', '.join(map(repr, undeclared))} neither compared nor excluded "
                          "(declare it in tests/golden_tables.py TABLES)")
    missing = [k for k in t.key if k not in df.columns]
    if missing:
        raise GoldenError(f"{name}: no key column {', '.join(map(repr, missing))}")
    df = df[~df[t.key[0]].isin(list(t.left_out))]
    df = df[[c for c in df.columns if c in t.key or _matches(c, t.compared) and not _matches(c, t.excluded)]].copy()
    for rows in t.only_in:
        df.loc[~df[t.key[0]].isin(rows.keep), [c for c in rows.columns if c in df.columns]] = ""
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def _keyed(name: str, text: str, key: tuple[str, ...], side: str) -> pd.DataFrame:
    df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    if not all(k in df.columns for k in key):
        raise GoldenError(f"{name}: the {side} table has no key column {key}")
    dup = df[df.duplicated(list(key), keep=False)]
    if len(dup):
        raise GoldenError(f"{name}: the {side} table repeats the row key {_row(key, dup.iloc[0])}")
    return df.set_index(list(key), drop=False)


def _row(key: tuple[str, ...], row) -> str:
    return ", ".join(f"{k}={row[k]}" for k in key)


def compare(name: str, got: str, want: str) -> list[str]:
    """Each difference of the regenerated deterministic part `got` from the golden `want`, one
    line each: a changed cell as "table, row key, column: want X got Y", and rows and columns
    that came or went. Empty when they are the same."""
    key = TABLES[name].key
    g, w = _keyed(name, got, key, "regenerated"), _keyed(name, want, key, "golden")
    out = [f"{name}: column {c!r} {what}" for cols, other, what in ((w.columns, g.columns, "gone"),
                                                                     (g.columns, w.columns, "new"))
           for c in cols if c not in other]
    out += [f"{name}, row {_row(key, w.loc[k])}: gone" for k in w.index if k not in g.index]
    out += [f"{name}, row {_row(key, g.loc[k])}: new" for k in g.index if k not in w.index]
    common = [c for c in w.columns if c in g.columns and c not in key]
    for k in (k for k in w.index if k in g.index):
        out += [f"{name}, row {_row(key, w.loc[k])}, {c}: want {w.at[k, c]!r} got {g.at[k, c]!r}"
                for c in common if w.at[k, c] != g.at[k, c]]
    if not out and got != want:
        out.append(f"{name}: same rows and cells in another order")
    return out


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


def _snakemake(work: Path, targets: list[str]) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    cmd = [sys.executable, "-m", "snakemake", *targets, "-s", str(ROOT / "Snakefile"), "-d", str(work),
           "--cores", "2", "--resources", "storage_exclusive=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError("snakemake failed:\n" + proc.stderr[-4000:])


def regenerate(work: Path) -> Path:
    """Run the synthetic study's table through Snakemake in `work` at tests/golden/config.yaml;
    the table's path."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "engine").symlink_to(ROOT / "engine")
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(golden_config(work)))
    _snakemake(work, [f"{TABLES_DIR}/pager-synthetic.csv"])
    return work / TABLES_DIR / "pager-synthetic.csv"


def regenerate_campaign(work: Path) -> Path:
    """The tiny campaign's tables (tests/conftest.py's config) made in `work`; its folder."""
    from conftest import tiny_workdir  # the integration tests' tiny pipeline, as they run it

    work.mkdir(parents=True, exist_ok=True)
    tiny_workdir(work)
    _snakemake(work, [f"{TABLES_DIR}/{n}.csv" for n in CAMPAIGN_TABLES])
    return work


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write the regenerated tables as the golden files")
    ap.add_argument("--campaign", type=Path, help="a finished tiny campaign's folder to read instead of running one")
    a = ap.parse_args(argv)
    got = {}
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        got["pager-synthetic"] = deterministic_part("pager-synthetic", regenerate(Path(tmp) / "synthetic"))
        work = a.campaign or regenerate_campaign(Path(tmp) / "campaign")
        for n in CAMPAIGN_TABLES:
            got[n] = deterministic_part(n, work / TABLES_DIR / f"{n}.csv")
    if a.update:
        for n, text in got.items():
            atomic.write_text(GOLDEN / f"{n}.csv", text)
        print(f"wrote {len(got)} tables under {GOLDEN.relative_to(ROOT)}: commit them with the change that explains it")
        return 0
    changes = [line for n, text in got.items() for line in compare(n, text, (GOLDEN / f"{n}.csv").read_text())]
    print("\n".join(changes) or f"golden tables: {len(got)} identical")
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main())
