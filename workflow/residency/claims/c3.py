"""C3 (reference 004 §5.4, Table 7): every prespecified deterministic control/fault cell
satisfies its validators across two adapters, from results/faults.parquet.

The set is fixed in the config before the run (faults.cells on the first adapter,
faults.c3_second_adapter on the second: the reference's ten and four). Each cell's
validators are fault_validators.py's; a cell is asserted valid one by one, so a missing or
unevaluable cell makes the claim insufficient-evidence and an invalid one makes it fail.
The cells outside the set run too and are reported (Table 7), not asserted.

The reference's statement has a GPU half: the cells ran at the adapter/GPU boundary, with
zero foreign compute processes on the board and no invalid H2D copy. Here the adapters
place nothing on a device; `gpu_boundary` is true only when every prespecified cell ran
under a whole-board GPU audit (grade audited) with zero foreign compute processes, and is
null otherwise, so that half alone makes the verdict insufficient-evidence, named.
"""

from __future__ import annotations

import json

from residency.claims.record import Assertion, ClaimResult, as_text

ID = "C3"
REFERENCE = ("Reference claim C3: in later fault-instrumented executables, all fourteen prespecified deterministic "
             "control/fault cells (ten on Qwen3-Next 512+8, zero cache, eight O_DIRECT windows, greedy; no-fault, "
             "short, stale and held-consumer on Gemma 4 under a hard 8 GiB cgroup) satisfy their validators: the "
             "five fatal cells accept zero tokens and logits, publish no invalid readiness or H2D, retain the "
             "interrupted Plan window and drain the source executor; the recoverable cells retain exact tokens, "
             "logits, routes, source identities and final cache state against control before clean shutdown; swap, "
             "max/OOM events and foreign compute PIDs are zero; every terminal source executor has zero active "
             "tickets and all eight windows free.")
INPUTS = {"faults": "results/faults.parquet"}


def _cell(r) -> dict:
    return {"class": r["class"], "status": r["status"], "valid": None if r["valid"] is None else bool(r["valid"]),
            "reasons": as_text(r["reasons"]), "checks": json.loads(r["checks_json"]), "run_dir": r["run_dir"]}


def compute(frames, settings) -> ClaimResult:
    t = frames["faults"]
    pre = t[t["prespecified"]]
    cells: dict = {}
    for _, r in pre.iterrows():
        cells.setdefault(r["adapter"], {})[r["cell"]] = _cell(r)
    audited = [bool(g == "audited" and f == 0) for g, f in zip(pre["gpu_grade"], pre["foreign_compute_processes"])]
    outside = t[~t["prespecified"]]
    v = {"cells": cells, "prespecified": int(len(pre)), "valid": int(sum(pre["valid"].eq(True))),
         "adapters": list(pre.sort_values("adapter_rank")["adapter"].unique()), "swap_off": [bool(x) for x in pre["swap_off"]],
         "gpu_grades": sorted(set(map(str, pre["gpu_grade"]))),
         "gpu_boundary": True if audited and all(audited) else None,
         "outside_set": {f"{r['adapter']}/{r['cell']}": {"valid": None if r["valid"] is None else bool(r["valid"]),
                                                          "reasons": as_text(r["reasons"])} for _, r in outside.iterrows()}}
    insufficient = []
    if len(cells) < 2:
        insufficient.append(f"C3 needs cells on two adapters; results/faults.parquet has {len(cells)}")
    headline = (f"{v['valid']} of {v['prespecified']} prespecified cells valid on {', '.join(v['adapters'])}; "
                f"{sum(1 for x in v['outside_set'].values() if x['valid'])} of {len(v['outside_set'])} further cells "
                f"valid; GPU grade {', '.join(v['gpu_grades'])}.")
    assertions = [Assertion(f"/values/cells/{a}/{c}/valid", "eq", True,
                            why=f"{a} {c}: {cells[a][c]['reasons'] or 'its validators'}")
                  for a in sorted(cells) for c in sorted(cells[a])]
    assertions += [
        Assertion("/values/swap_off", "all_true", why="swap zero: off for every prespecified cell's cgroup"),
        Assertion("/values/gpu_boundary", "eq", True,
                  why="the reference's GPU half: the cells at the adapter/GPU boundary under a whole-board audit "
                      f"with zero foreign compute processes; GPU grades here: {', '.join(v['gpu_grades'])}"),
    ]
    return ClaimResult(headline, v, assertions, insufficient)
