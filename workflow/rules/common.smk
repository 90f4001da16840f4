# Shared names and helpers: paths, the campaign's cells, the config digest, the residctl
# flags of a cell. Rule files hold rules only.

import re

from residency import arms
from residency.identity import digest

CONDA_ENV = "../../environment.yml"  # relative to the rule files; used with --sdm conda
RESIDCTL = f"{config['engine']['build_dir']}/residctl"
PS = config["pager_synthetic"]
PS_DIGEST = digest({"engine": config["engine"], "pager_synthetic": PS})
REGION = f"results/regions/synthetic-{PS['region_bytes']}-s{PS['seed']}.bin"
REGION_IDENTITY = f"results/regions/synthetic-{PS['region_bytes']}-s{PS['seed']}.bin.json"
RUNS = "results/runs/pager_synthetic"
LOGS = "results/logs"
RESIDENCY_SRC = str(Path(workflow.basedir) / "workflow" / "residency")


def residency_code(*modules):
    """Source files of the residency package a derived output depends on: changing how a
    number is computed remakes it."""
    return [f"{RESIDENCY_SRC}/{m}" for m in modules]


def ratio_str(r):
    return f"{float(r):g}"


def budget_bytes(r):
    """The weight-residency budget r * T_repr, in whole bytes."""
    return int(float(r) * PS["region_bytes"])


def run_dir(output):
    """The run directory of a cell: where its harness.json lives."""
    return str(Path(output[0]).parent)


def scan_args(arm, r, threads, compute_us, signal):
    """The residctl scan flags of one cell (the run directory is added by the rule)."""
    args = [
        f"--region {REGION}", f"--seed {PS['seed']}", f"--arm {arm}",
        f"--chunk-size {PS['chunk_bytes']}", f"--passes {PS['passes']}",
        f"--threads {threads}", f"--compute-us {compute_us}", f"--signal {signal}",
        f"--watchdog-s {PS['watchdog_s']}",
    ]
    if arm != "kernel-mmap":
        args += [f"--budget-bytes {budget_bytes(r)}", f"--source {PS['source']}",
                 f"--prefetch-depth {PS['prefetch_depth']}"]
    if PS["eager_reconcile"]:
        args.append("--eager-reconcile")
    return " ".join(args)


def harness_meta(**kv):
    """--meta flags: the cell's coordinates and the config digest, recorded in harness.json."""
    return " ".join(f"--meta {k}={v}" for k, v in kv.items()) + f" --meta config_digest={PS_DIGEST}"


# O is calibrated with every arm of the campaign; each arm's run is charged minus what
# that arm pays out of its weight budget (the pager's window), and the highest is O.
CALIBRATION_ARMS = sorted({*PS["main"]["arms"], *PS["stress"]["arms"]})


def calibration_runs(wildcards):
    return [f"{RUNS}/calibrate/{arm}/t{wildcards.threads}/rep{k}/harness.json"
            for arm in CALIBRATION_ARMS
            for k in range(1, config["harness"]["overhead_reps"] + 1)]


def model_identity(gguf_path):
    """The identity record next to a model file made by these rules."""
    return gguf_path[: -len(".gguf")] + ".json"


def model_inventory(gguf_path):
    return gguf_path[: -len(".gguf")] + ".inventory.json"


MAIN_CELLS = [
    f"{RUNS}/main/{arm}/r{ratio_str(r)}/rep{rep}/harness.json"
    for arm in PS["main"]["arms"]
    for r in PS["main"]["ratios"]
    for rep in range(1, PS["main"]["reps"] + 1)
]
STRESS_CELLS = [
    f"{RUNS}/stress/{arm}/{signal}/t{t}-c{c}/rep{rep}/harness.json"
    for arm in PS["stress"]["arms"]
    for signal in PS["stress"]["signals"]
    for t in PS["stress"]["threads"]
    for c in PS["stress"]["compute_us"]
    for rep in range(1, PS["stress"]["reps"] + 1)
]


wildcard_constraints:
    arm="|".join(arms.PAGER_ARMS),
    signal="all-threads-finished|thread0-started",
    r=r"[0-9.]+",
    rep=r"\d+",
    threads=r"\d+",
    compute=r"\d+",


# ---- the real-model pager study (reference 000 on llama.cpp) ------------------------------

PM = config["pager_model"]
PM_RUNS = "results/runs/pager_model"
PM_DIGEST = digest({"engine": config["engine"], "llama": config["llama"], "pager_model": PM})
PM_NAME = PM["model"].replace("user:", "")


def pm_model():
    """(GGUF path, identity record, tensor inventory) of the configured model."""
    m = PM["model"]
    if m == "smollm2":
        g = MODEL_SMOLLM2
    elif m.startswith("synthetic-"):
        g = MODEL_SYNTH[m.split("-", 1)[1]]
    else:
        n = m[len("user:"):]
        return USER_MODELS[n]["path"], USER_IDENTITY[n], USER_INVENTORY[n]
    return g, model_identity(g), model_inventory(g)


def pm_t_repr(inventory_path):
    """T_repr: the model's tensor payload bytes, from its inventory."""
    import json as _j

    return int(_j.loads(Path(inventory_path).read_text())["tensor_bytes"])


def pm_budget(inventory_path, r):
    return int(float(r) * pm_t_repr(inventory_path))


def generate_args(model, arm, budget, source=None):
    """The residctl generate flags of one cell (run directory added by the rule)."""
    args = [
        f"--model {model}", f"--arm {arm}", f"--chunk-size {PM['chunk_bytes']}",
        f"--tokens {PM['tokens']}", f"--threads {PM['threads']}", f"--ctx {PM['ctx']}",
        f"--watchdog-s {PM['watchdog_s']}",
    ]
    if arm != "kernel-mmap":
        args += [f"--budget-bytes {budget}", f"--source {source or PM['source']}",
                 f"--prefetch-depth {PM['prefetch_depth']}", f"--huge-chunks {PM['huge_chunks']}"]
    if PM["eager_reconcile"]:
        args.append("--eager-reconcile")
    return " ".join(args)


def pm_meta(**kv):
    return " ".join(f"--meta {k}={v}" for k, v in kv.items()) + f" --meta config_digest={PM_DIGEST}"


def pm_calibration_runs(wildcards):
    return [f"{PM_RUNS}/{PM_NAME}/calibrate/{arm}/rep{k}/harness.json"
            for arm in PM["arms"] for k in range(1, config["harness"]["overhead_reps"] + 1)]


PM_CELLS = [
    f"{PM_RUNS}/{PM_NAME}/{arm}/r{ratio_str(r)}/rep{rep}/harness.json"
    for arm in PM["arms"] for r in PM["ratios"] for rep in range(1, PM["reps"] + 1)
]
PM_BASELINES = [f"{PM_RUNS}/{PM_NAME}/baseline/rep{rep}/harness.json" for rep in range(1, PM["baseline_reps"] + 1)]


# ---- the matched source campaign (reference 004 §5.3) -------------------------------------

MS = config["matched_source"]
MS_RUNS = f"results/runs/matched_source/{PM_NAME}"
MS_SOURCE = arms.SOURCE_ENGINE
# The cells in the order they must run: the oracle, P, then each pair in its given order.
MS_SEQUENCE = ["oracle", "P"] + [f"pair{k}/{arm}" for k, order in enumerate(MS["pairs"], 1) for arm in order.split("-")]
MS_CELLS = [f"{MS_RUNS}/{cell}/harness.json" for cell in MS_SEQUENCE]


def ms_previous(wildcards):
    """The cell that runs just before this one (the order is part of the design)."""
    i = MS_SEQUENCE.index(wildcards.cell)
    return [MS_CELLS[i - 1]] if i else []


def ms_cell(cell):
    """(source arm, block) of a cell name: oracle, P, or pair<k>/<D|F>."""
    m = re.fullmatch(r"pair(\d+).([DF])", cell)
    return (m.group(2), int(m.group(1))) if m else (cell, 0)


def ms_host_budget(inventory):
    """The weight side of every matched cell's host limit: r * T_repr plus the windows F holds
    beyond D's one, so the cache (in chunks) and the host limit are the same in every cell."""
    return pm_budget(inventory, MS["ratio"]) + (MS["windows"] - 1) * PM["chunk_bytes"]


def ms_pager_budget(cell, inventory):
    """The pager budget of a cell: it pays the cell's own windows, so F's extra windows are
    added to it and its cache stays the size of D's and P's."""
    arm, _ = ms_cell(cell)
    return ms_host_budget(inventory) if arm == "F" else pm_budget(inventory, MS["ratio"])


def ms_generate_args(cell, model, budget):
    arm, _ = ms_cell(cell)
    # The oracle is the same-build synchronous-source control: direct, without a host limit.
    args = generate_args(model, MS["policy"], budget, source=MS_SOURCE["D" if arm == "oracle" else arm])
    if arm == "F":
        args += f" --windows {MS['windows']} --depth {MS['depth']}"
    return args


def ms_meta(cell, inventory):
    arm, block = ms_cell(cell)
    order = MS["pairs"][block - 1] if block else ""
    return pm_meta(campaign="matched", arm=MS["policy"], source_arm=arm, block=block, order=order,
                   position=MS_SEQUENCE.index(cell), r=ratio_str(MS["ratio"]), rep=1,
                   t_repr_bytes=pm_t_repr(inventory), reserve_bytes=MS["reserve_bytes"])
