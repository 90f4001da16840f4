#!/usr/bin/env python3
"""Behaviour digests of a results tree, and their comparison between two trees.

A restructure of the engine must not change what it computes. This reads every run
directory under RESULTS/runs and prints, per cell, the sha256 of what the run produced
that the config determines: `trace.bin` (the synthetic study's chunk access trace, and the
model study's), `tokens.json` and `logits.f32`. Cells whose repetitions already differ in
the tree itself (a timing-dependent trace, e.g. arm E's prefetch or an oversize step) are
reported as such and compared as sets. A cell of one repetition cannot show that: with
CONTROL (a second run of the same code as AFTER), a cell whose digest differs between AFTER
and CONTROL is timing-dependent too, and a difference between BEFORE and AFTER there is
reported apart, not counted as a change of behaviour.

    bench/behaviour_digests.py RESULTS                 # the digests of one tree
    bench/behaviour_digests.py BEFORE AFTER            # compare: exit 1 on a difference
    bench/behaviour_digests.py BEFORE AFTER CONTROL    # CONTROL: a second run of AFTER's code
    bench/behaviour_digests.py --claims BEFORE AFTER   # two checkouts' claims/*.json: verdicts and values

Claim values that are timings (tokens/s, ratios of wall times) differ between any two runs
on a shared machine; the claims comparison prints every value that changed and exits 1
only when a verdict did.
"""

import hashlib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

FILES = ("trace.bin", "tokens.json", "logits.f32")


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


def digests(root: Path) -> dict:
    """{(cell without its rep, file): [digest per rep, in rep order]} of every ok run."""
    out = defaultdict(list)
    for run in sorted((root / "runs").rglob("run.json")):
        d = run.parent
        if '"status": "ok"' not in run.read_text():
            continue
        cell = re.sub(r"/rep\d+$", "", str(d.relative_to(root / "runs")))
        for f in FILES:
            if (d / f).exists():
                out[(cell, f)].append(sha(d / f))
    return out


def deterministic(reps: list) -> bool:
    return len(set(reps)) == 1


def compare(before: dict, after: dict, control: dict | None = None) -> int:
    same = differ = varies = timing = missing = 0
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if b is None or a is None:
            missing += 1
            print(f"missing in {'before' if b is None else 'after'}: {key}")
            continue
        if not (deterministic(b) and deterministic(a)):
            varies += 1  # timing-dependent in at least one tree: not a behaviour digest
        elif b[0] == a[0]:
            same += 1
        elif control is not None and control.get(key) not in (None, a):
            timing += 1
            print(f"differs, as between two runs of the same code (timing-dependent): {key}")
        else:
            differ += 1
            print(f"DIFFERS {key}: {b[0]} -> {a[0]}")
    print(f"identical {same}, different {differ}, varying across reps {varies}, "
          f"{'' if control is None else f'differing between two runs of the same code {timing}, '}missing {missing}")
    return 1 if differ or missing else 0


def claims(checkout: Path) -> dict:
    """{claim id: (verdict, flattened values)} of a checkout's claim records."""
    out = {}
    for p in sorted((checkout / "claims").glob("*.json")):
        doc = json.loads(p.read_text())
        if "verdict" in doc:
            out[doc.get("id", p.stem)] = (doc["verdict"], dict(_flat(doc.get("values", {}))))
    return out


def _flat(v, prefix=""):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _flat(x, f"{prefix}/{k}")
    elif isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
        yield prefix, v
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _flat(x, f"{prefix}/{i}")
    else:
        yield prefix, v


def compare_claims(before: dict, after: dict) -> int:
    changed = 0
    for cid in sorted(set(before) | set(after)):
        (vb, b), (va, a) = before.get(cid, ("absent", {})), after.get(cid, ("absent", {}))
        diff = sorted(k for k in set(b) | set(a) if b.get(k) != a.get(k))
        changed += vb != va
        print(f"{cid}: {vb} -> {va}{'  VERDICT CHANGED' if vb != va else ''}; {len(set(b) & set(a)) - len(diff)} "
              f"values equal, {len(diff)} differ{': ' + ', '.join(diff[:8]) if diff else ''}"
              f"{' ...' if len(diff) > 8 else ''}")
    print(f"verdicts changed: {changed}")
    return 1 if changed else 0


def main(argv: list) -> int:
    if len(argv) == 4 and argv[1] == "--claims":
        return compare_claims(claims(Path(argv[2])), claims(Path(argv[3])))
    if len(argv) == 2:
        for (cell, f), reps in sorted(digests(Path(argv[1])).items()):
            print(f"{cell}\t{f}\t{' '.join(reps)}{'' if deterministic(reps) else '  (varies)'}")
        return 0
    if len(argv) in (3, 4):
        control = digests(Path(argv[3])) if len(argv) == 4 else None
        return compare(digests(Path(argv[1])), digests(Path(argv[2])), control)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
