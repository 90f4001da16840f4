"""The campaigns' cells: run paths, budgets, config digests and each cell's residctl flags.

Plain functions of the config dict (config/config.yaml, validated), with no Snakemake in
them: workflow/rules/common.smk binds them to the loaded config for the rules, and
tests/test_cells.py pins the strings they make. A rule's paths, flags and --meta values
all come from here, so what a run was asked to do can be read (and tested) in one file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from residency.core import arms
from residency.core.identity import digest

LOGS = "results/logs"
RUNS = "results/runs/pager_synthetic"
PM_RUNS = "results/runs/pager_model"
MODELS_DIR = "results/models"
SYNTHETIC_VARIANTS = ("dense", "moe", "sparse-moe")
USER_PREFIX = "user:"

# ---- shared -------------------------------------------------------------------------------


def residctl(config: dict) -> str:
    """The engine binary the engine rule builds."""
    return f"{config['engine']['build_dir']}/residctl"


def ratio_str(r) -> str:
    """A budget ratio as it appears in paths and --meta (0.5, not 0.50)."""
    return f"{float(r):g}"


def run_dir(output) -> str:
    """The run directory of a cell: where its harness.json (the rule's first output) lives."""
    return str(Path(output[0]).parent)


def overhead_margin_flags(config: dict) -> list[str]:
    """`residency overhead` flags: the margin that makes the calibrated O a reserve R."""
    h = config["harness"]
    return opts(margin=h["overhead_margin"], margin_min_bytes=h["overhead_margin_min_bytes"],
                spread_factor=h["overhead_spread_factor"])


def run_dirs(records) -> list[str]:
    """The run directories of run records (harness.json paths), one argument each."""
    return [str(Path(p).parent) for p in records]


def opts(**kv) -> list[str]:
    """Command-line options as an argument list, in the given order: `chunk_size=2` is
    ["--chunk-size", "2"], True a bare flag, None or False nothing. Every flag builder here
    returns such a list: the rules quote each element (`{params.gen:q}`), so a value from a
    config (a path with a space or a `$(...)`) reaches its program as one argument, never
    as shell text."""
    out = []
    for k, v in kv.items():
        if v is None or v is False:
            continue
        out.append("--" + k.replace("_", "-"))
        if v is not True:
            out.append(str(v))
    return out


def meta_flags(config_digest: str, kv: dict) -> list[str]:
    """--meta flags: the cell's coordinates, then the config digest (recorded in harness.json)."""
    return [a for k, v in [*kv.items(), ("config_digest", config_digest)] for a in ("--meta", f"{k}={v}")]


def pager_flags(section: dict, arm: str, budget, source: str, extra: list[str], digests: str | None) -> list[str]:
    """The flags only a pager arm takes (arm A runs on plain mmap: no fill to check), then
    --eager-reconcile. `digests`: the content digests every fill is checked against."""
    out = []
    if arm != arms.KERNEL_MMAP:
        out += opts(budget_bytes=budget, source=source, prefetch_depth=section["prefetch_depth"]) + extra
        out += opts(consumption=section.get("consumption"), content_digests=digests or None)
    return out + opts(eager_reconcile=bool(section["eager_reconcile"]))


def model_identity(gguf_path: str) -> str:
    """The identity record next to a model file made by the model rules: written by the
    verification rule, which re-hashes the file whenever it changed."""
    return gguf_path[: -len(".gguf")] + ".json"


def model_origin(gguf_path: str) -> str:
    """What the fetch or synthesis recorded when it made the file (the sha256 it must keep)."""
    return gguf_path[: -len(".gguf")] + ".origin.json"


def content_digests(identity_path: str, chunk_bytes: int) -> str:
    """`residctl inventory`'s content digests of a model or region at a chunk size, next to
    its identity record (whose sha256 the digests' whole-file sha256 must equal)."""
    return identity_path[: -len(".json")] + f".chunks-{chunk_bytes}.json"


def content_check(section: dict) -> bool:
    """Whether a campaign's pager fills are checked against content digests (default on)."""
    return section.get("content_check", True)


def run_sections(config: dict) -> dict:
    """The sections every run depends on: the engine and the llama.cpp it links, and the
    harness (cgroup mode and calibration reps change a run's limit and grade)."""
    return {k: config[k] for k in ("engine", "llama", "harness")}


def model_inventory(gguf_path: str) -> str:
    """The tensor inventory next to a model file made by the model rules."""
    return gguf_path[: -len(".gguf")] + ".inventory.json"


def _reps(n: int) -> range:
    return range(1, n + 1)


# ---- the synthetic pager study (reference 000 on a cyclic scan) ---------------------------


def ps_digest(config: dict) -> str:
    """The config digest of the synthetic study's runs: what every run depends on and the
    study's own section (which also fixes the region: its size and seed)."""
    return digest(run_sections(config) | {"pager_synthetic": config["pager_synthetic"]})


def region(config: dict) -> str:
    ps = config["pager_synthetic"]
    return f"results/regions/synthetic-{ps['region_bytes']}-s{ps['seed']}.bin"


def region_identity(config: dict) -> str:
    return region(config) + ".json"


def ps_content_digests(config: dict) -> str | None:
    """The region's content digests the synthetic pager arms check fills against (None: off)."""
    ps = config["pager_synthetic"]
    return content_digests(region_identity(config), ps["chunk_bytes"]) if content_check(ps) else None


def budget_bytes(config: dict, r) -> int:
    """The weight-residency budget r * T_repr (T_repr: the region's size), in whole bytes."""
    return int(float(r) * config["pager_synthetic"]["region_bytes"])


def scan_args(config: dict, arm: str, r, threads, compute_us, signal, passes=None, watchdog_s=None) -> list[str]:
    """The residctl scan flags of one cell (the run directory is added by the rule); passes
    and watchdog default to the synthetic study's."""
    ps = config["pager_synthetic"]
    args = opts(region=region(config), seed=ps["seed"], arm=arm, chunk_size=ps["chunk_bytes"],
                passes=passes or ps["passes"], threads=threads, compute_us=compute_us, signal=signal,
                watchdog_s=watchdog_s or ps["watchdog_s"])
    return args + pager_flags(ps, arm, budget_bytes(config, r), ps["source"], [], ps_content_digests(config))


def stress_jitter_us(config: dict, compute_us) -> int:
    """The stress jitter lives in the compute phase: a cell without one (compute_us 0, the
    "concurrency without compute" control) gets none."""
    return config["pager_synthetic"]["stress"]["jitter_us"] if int(compute_us) > 0 else 0


def stress_scan_args(config: dict, arm: str, threads, compute_us, signal) -> list[str]:
    """The residctl scan flags of one stress cell: the stress ratio, and driver threads kept
    in step (`step`) or free-running (`none`) with seeded per-thread compute jitter, so the
    racy signal's race can happen (config/README.md says why)."""
    s = config["pager_synthetic"]["stress"]
    return (scan_args(config, arm, s["ratio"], threads, compute_us, signal)
            + opts(sync=s["sync"], jitter_us=stress_jitter_us(config, compute_us), jitter_seed=s["jitter_seed"]))


def stress_meta(config: dict, arm: str, threads, compute_us, signal, rep) -> list[str]:
    """The --meta flags of a stress cell: its coordinates in the matrix, sync and jitter included."""
    s = config["pager_synthetic"]["stress"]
    return harness_meta(config, campaign="stress", arm=arm, r=ratio_str(s["ratio"]), rep=rep, threads=threads,
                        compute_us=compute_us, signal=signal, sync=s["sync"],
                        jitter_us=stress_jitter_us(config, compute_us))


def harness_meta(config: dict, **kv) -> list[str]:
    return meta_flags(ps_digest(config), kv)


def calibration_arms(config: dict) -> list[str]:
    """O is calibrated with every arm of the campaign; each arm's run is charged minus what
    that arm pays out of its weight budget (the pager's window), and the highest is O."""
    ps = config["pager_synthetic"]
    return sorted({*ps["main"]["arms"], *ps["stress"]["arms"]})


def calibration_runs(config: dict, threads) -> list[str]:
    return [f"{RUNS}/calibrate/{arm}/t{threads}/rep{k}/harness.json"
            for arm in calibration_arms(config) for k in _reps(config["harness"]["overhead_reps"])]


def main_cells(config: dict) -> list[str]:
    m = config["pager_synthetic"]["main"]
    return [f"{RUNS}/main/{arm}/r{ratio_str(r)}/rep{rep}/harness.json"
            for arm in m["arms"] for r in m["ratios"] for rep in _reps(m["reps"])]


def stress_cells(config: dict) -> list[str]:
    s = config["pager_synthetic"]["stress"]
    return [f"{RUNS}/stress/{arm}/{signal}/t{t}-c{c}/rep{rep}/harness.json"
            for arm in s["arms"] for signal in s["signals"] for t in s["threads"] for c in s["compute_us"]
            for rep in _reps(s["reps"])]


# ---- models -------------------------------------------------------------------------------


def smollm2_gguf(config: dict) -> str:
    """The embedded real model, named after its member in the wheel."""
    return f"{MODELS_DIR}/{Path(config['models']['smollm2']['member']).stem}.gguf"


def synthetic_section(config: dict, variant: str) -> dict:
    """What a synthetic model of `variant` is written from: the shared keys of models.synthetic
    and its own shape (another variant's shape changes nothing of this one)."""
    syn = config["models"]["synthetic"]
    return {k: v for k, v in syn.items() if k in ("seed", "tensor_type", "alignment")} | {variant: syn[variant]}


def synthetic_gguf(variant: str) -> str:
    return f"{MODELS_DIR}/synthetic-{variant}.gguf"


def user_identity(name: str) -> str:
    return f"{MODELS_DIR}/user/{name}.json"


def user_inventory(name: str) -> str:
    return f"{MODELS_DIR}/user/{name}.inventory.json"


def model_gguf(config: dict, stem: str) -> str:
    """The GGUF behind a records stem under results/models: a made model's own file, or for
    user/<name> the user's path."""
    if stem.startswith("user/"):
        return _user_entry(config, stem[len("user/"):])["path"]
    return f"{MODELS_DIR}/{stem}.gguf"


def existing(path: str) -> list[str]:
    """[path] when the file is there, else [] (a rule's input that its command reports on)."""
    return [path] if Path(path).exists() else []


# ---- the real-model pager study (reference 000 on llama.cpp) ------------------------------


def entry_name(entry: str) -> str:
    """A pager_model.models entry's name in paths: smollm2, synthetic-<variant> or the user name."""
    return entry[len(USER_PREFIX):] if entry.startswith(USER_PREFIX) else entry


def pm_names(config: dict) -> list[str]:
    """The names of the configured models of the real-model study, the primary first."""
    return [entry_name(e) for e in config["pager_model"]["models"]]


def model_view(config: dict, name: str | None = None) -> dict:
    """The config as one model's study sees it (default: the primary, the first entry):
    pager_model.model is that model's entry and the list is gone, so the functions below
    read one model, and its config digest does not change when other models are added to
    or removed from the list. A config that is a view already comes back as it is."""
    pm = config["pager_model"]
    if "models" not in pm:
        return config
    entries = {entry_name(e): e for e in pm["models"]}
    one = {k: v for k, v in pm.items() if k != "models"}
    one["model"] = pm["models"][0] if name is None else entries[name]
    return {**config, "pager_model": one}


def is_primary(config: dict, name: str) -> bool:
    return pm_names(config)[0] == name


def model_spec(config: dict) -> dict:
    """The models entry the configured model is made from: its identity as configured (the
    pinned wheel and sha256, the synthetic spec the synthesis rule is given, or the user's
    path and sha256)."""
    m = model_view(config)["pager_model"]["model"]
    models = config["models"]
    if m == "smollm2":
        return {"smollm2": models["smollm2"]}
    if m.startswith("synthetic-"):
        return {m: synthetic_section(config, m.split("-", 1)[1])}
    return {m: _user_entry(config, m[len(USER_PREFIX):])}


DIGEST_EXEMPT = ("roofline_reps",)


def pm_sections(config: dict) -> dict:
    """What a real-model run depends on: every run's sections, the study's and the model's identity."""
    config = model_view(config)
    # roofline_reps counts calibration reads, which change no generate run: leaving it out
    # keeps the campaign's digests (and its runs) as they were when the roofline came in.
    pm = {k: v for k, v in config["pager_model"].items() if k not in DIGEST_EXEMPT}
    return run_sections(config) | {"pager_model": pm, "model": model_spec(config)}


def pm_digest(config: dict) -> str:
    """The config digest of the real-model runs."""
    return digest(pm_sections(config))


def ms_digest(config: dict) -> str:
    """The matched cells run the real-model study's generate with their own section on top."""
    return digest(pm_sections(config) | {"matched_source": config["matched_source"]})


def pm_name(config: dict) -> str:
    """The model's name in run paths: smollm2, synthetic-<variant> or the user entry's name."""
    return entry_name(model_view(config)["pager_model"]["model"])


def pm_model(config: dict) -> tuple[str, str, str]:
    """(GGUF path, identity record, tensor inventory) of the configured model."""
    m = model_view(config)["pager_model"]["model"]
    if m == "smollm2":
        g = smollm2_gguf(config)
    elif m.startswith("synthetic-"):
        g = synthetic_gguf(m.split("-", 1)[1])
    else:  # user:<name>, a GGUF of the user's; its records are made under results/models/user
        n = m[len(USER_PREFIX):]
        return _user_entry(config, n)["path"], user_identity(n), user_inventory(n)
    return g, model_identity(g), model_inventory(g)


def entry_view(config: dict, entry: str) -> dict:
    """The config as a campaign with its own model entry (faults.adapters, cache_transfer.model)
    sees it: pager_model's view with that entry as the model."""
    return model_view({**config, "pager_model": {**config["pager_model"], "models": [entry]}})


def entry_files(config: dict, entry: str) -> tuple[str, str]:
    """(GGUF path, identity record) of a model entry (smollm2, synthetic-<variant>, user:<name>)."""
    g, ident, _ = pm_model(entry_view(config, entry))
    return g, ident


def _user_entry(config: dict, name: str) -> dict:
    return {u["name"]: u for u in config["models"]["user"]}[name]


def missing_model(config: dict) -> str | None:
    """One line when a configured model is a user GGUF whose file is not there (every
    other model is fetched or written by a rule). Checked when the workflow starts: with the
    old model's outputs still present, a missing file would otherwise pass for "nothing to
    be done" (Snakemake takes an existing file whose producer cannot run as up to date)."""
    for m in config["pager_model"]["models"]:
        if not m.startswith(USER_PREFIX):
            continue
        path = Path(_user_entry(config, m[len(USER_PREFIX):])["path"])
        if not path.is_file():
            what = "not a regular file" if path.exists() else "missing"
            return f"model error: pager_model.models {m}: {path}: {what}"
    return None


def pm_content_digests(config: dict) -> str | None:
    """The model's content digests the real-model pager arms check fills against (None: off)."""
    pm = config["pager_model"]
    return content_digests(pm_model(config)[1], pm["chunk_bytes"]) if content_check(pm) else None


def pm_t_repr(inventory_path) -> int:
    """T_repr: the model's tensor payload bytes, from its inventory."""
    return int(json.loads(Path(inventory_path).read_text())["tensor_bytes"])


def pm_budget(inventory_path, r) -> int:
    """The weight-residency budget r * T_repr of the model, in whole bytes."""
    return int(float(r) * pm_t_repr(inventory_path))


def pm_graph_plan(config: dict) -> str:
    """The object boundaries llama.cpp's graph gives this model and prompt, learned once by
    `residctl generate --graph-plan-out` so the measured runs make no discovery pass."""
    return f"{PM_RUNS}/{pm_name(config)}/graph-plan/graph-plan.json"


def graph_plan_flags(config: dict) -> list[str]:
    """The unmeasured plain-mmap generation that learns the graph plan (object boundaries and,
    with consumption tensor, release nodes and read order); --prompt, --graph-plan-out and
    --out are the caller's."""
    pm = config["pager_model"]
    return opts(arm="kernel-mmap", tokens=2, threads=pm["threads"], ctx=pm["ctx"], consumption=pm["consumption"])


def generate_args(config: dict, model: str, arm: str, budget, source: str | None = None, threads=None) -> list[str]:
    """The residctl generate flags of one cell (run directory added by the rule); `threads`
    overrides pager_model.threads (the matched cells run their own count)."""
    pm = config["pager_model"]
    args = opts(model=model, arm=arm, chunk_size=pm["chunk_bytes"], tokens=pm["tokens"],
                threads=pm["threads"] if threads is None else threads, ctx=pm["ctx"], watchdog_s=pm["watchdog_s"],
                graph_plan=pm_graph_plan(config))
    huge = opts(huge_chunks=pm["huge_chunks"])
    return args + pager_flags(pm, arm, budget, source or pm["source"], huge, pm_content_digests(config))


def pm_meta(config: dict, **kv) -> list[str]:
    return meta_flags(pm_digest(config), kv)


def pm_calibration_runs(config: dict) -> list[str]:
    return [f"{PM_RUNS}/{pm_name(config)}/calibrate/{arm}/rep{k}/harness.json"
            for arm in config["pager_model"]["arms"] for k in _reps(config["harness"]["overhead_reps"])]


def pm_cells(config: dict) -> list[str]:
    pm = config["pager_model"]
    return [f"{PM_RUNS}/{pm_name(config)}/{arm}/r{ratio_str(r)}/rep{rep}/harness.json"
            for arm in pm["arms"] for r in pm["ratios"] for rep in _reps(pm["reps"])]


def pm_baselines(config: dict) -> list[str]:
    """The unconstrained plain-mmap runs; rep 1 is the exactness oracle."""
    return [f"{PM_RUNS}/{pm_name(config)}/baseline/rep{rep}/harness.json"
            for rep in _reps(config["pager_model"]["baseline_reps"])]


def pm_roofline_runs(config: dict) -> list[str]:
    """The storage bandwidth calibration of the roofline: roofline_reps reads of the model file."""
    return [f"{PM_RUNS}/{pm_name(config)}/roofline/rep{k}/harness.json"
            for k in _reps(config["pager_model"]["roofline_reps"])]


def roofline_stream_args(config: dict, model: str) -> list[str]:
    """`residctl stream` over the model file as the pager's fills read it: the campaign's chunk
    size and source (direct: O_DIRECT, one read in flight; buffered: pread), one consumer."""
    pm = config["pager_model"]
    chunk = pm["chunk_bytes"]
    return opts(file=model, object_bytes=chunk, window_bytes=chunk, source=pm["source"], windows=1, depth=1,
                consumers=1, watchdog_s=pm["watchdog_s"])


def pm_roofline(config: dict, name: str) -> str:
    return f"{pm_results(config, name)}/pager_model_roofline.parquet"


# ---- the model sweep: every further model of pager_model.models --------------------------

SWEEP = "results/sweep"
SWEEP_CLAIMS = "claims/models"


def pm_results(config: dict, name: str) -> str:
    """Where a model's Parquet lives: results/ for the primary (results/pager_model.parquet,
    as with one model), results/sweep/<name>/ for every further model."""
    return "results" if is_primary(config, name) else f"{SWEEP}/{name}"


def pm_parquet(config: dict, name: str) -> str:
    return f"{pm_results(config, name)}/pager_model.parquet"


def pm_opt(config: dict, name: str) -> str:
    return f"{pm_results(config, name)}/pager_model_opt.parquet"


def pm_table_stem(config: dict, name: str) -> str:
    """The model's pager-model table (csv/md/tex next to each other)."""
    return "results/tables/pager-model" if is_primary(config, name) else f"{SWEEP}/{name}/tables/pager-model"


def pm_claim(config: dict, name: str, claim_id: str) -> str:
    """A model claim's record: claims/<ID>.json for the primary, claims/models/<name>/<ID>.json else."""
    return f"claims/{claim_id}.json" if is_primary(config, name) else f"{SWEEP_CLAIMS}/{name}/{claim_id}.json"


def sweep_names(config: dict) -> list[str]:
    """The models after the primary: each runs the whole real-model study under its own paths."""
    return pm_names(config)[1:]


# ---- the matched source campaign (reference 004 §5.3) -------------------------------------

# A cell name: the oracle, P, or pair<k>/<D|F> (k counts the configured pairs from 1).
MS_CELL_PATTERN = f"{arms.ORACLE}|{arms.BUFFERED}|pair[0-9]+/[{arms.DIRECT}{arms.ASYNC}]"
_PAIR_CELL = re.compile(rf"pair(\d+)/([{arms.DIRECT}{arms.ASYNC}])")


def ms_runs(config: dict) -> str:
    return f"results/runs/matched_source/{pm_name(config)}"


def ms_sequence(config: dict) -> list[str]:
    """The cells in the order they must run: the oracle, P, then each pair in its given order."""
    pairs = config["matched_source"]["pairs"]
    return [arms.ORACLE, arms.BUFFERED] + [f"pair{k}/{arm}" for k, order in enumerate(pairs, 1)
                                           for arm in order.split("-")]


def ms_cells(config: dict) -> list[str]:
    return [f"{ms_runs(config)}/{cell}/harness.json" for cell in ms_sequence(config)]


def ms_previous(config: dict, cell: str) -> list[str]:
    """The cell that runs just before this one (the order is part of the design)."""
    i = ms_sequence(config).index(cell)
    return [ms_cells(config)[i - 1]] if i else []


def ms_cell(cell: str) -> tuple[str, int]:
    """(source arm, block) of a cell name: oracle, P, or pair<k>/<D|F>; block 0 is no pair."""
    m = _PAIR_CELL.fullmatch(cell)
    return (m.group(2), int(m.group(1))) if m else (cell, 0)


def ms_host_budget(config: dict, inventory) -> int:
    """The weight allowance A = H_cap - R_policy of every capped matched cell:
    matched_source.ratio x T_repr (premise.py); the harness adds R_policy, the calibrated
    reserve, for the limit. The same in every cell, so is the host limit."""
    return pm_budget(inventory, config["matched_source"]["ratio"])


def ms_pager_budget(config: dict, cell: str, inventory) -> int:
    """The pager budget of a cell: it pays the cell's own windows. F's is the whole allowance
    (its windows inside); D's, P's and the oracle's leave F's extra windows out, so every
    cell's cache (in chunks) is the same."""
    arm, _ = ms_cell(cell)
    allowance = ms_host_budget(config, inventory)
    if arm == arms.ASYNC:
        return allowance
    return allowance - (config["matched_source"]["windows"] - 1) * config["pager_model"]["chunk_bytes"]


def ms_premise(config: dict) -> str:
    """The matched campaign's premise record (premise.py): every cell of the campaign needs it."""
    return f"{ms_runs(config)}/premise.json"


def ms_premise_flags(config: dict) -> list[str]:
    ms = config["matched_source"]
    return opts(ratio=ms["ratio"], windows=ms["windows"], chunk_bytes=config["pager_model"]["chunk_bytes"])


def ms_generate_args(config: dict, cell: str, model: str, budget) -> list[str]:
    ms = config["matched_source"]
    arm, _ = ms_cell(cell)
    # The oracle is the same-build synchronous-source control: direct, without a host limit.
    source = arms.SOURCE_ENGINE[arms.DIRECT if arm == arms.ORACLE else arm]
    # Every matched cell, the oracle included, runs matched_source.threads compute threads.
    args = generate_args(config, model, ms["policy"], budget, source=source, threads=ms["threads"])
    if arm == arms.ASYNC:
        args += opts(windows=ms["windows"], depth=ms["depth"])
    return args


def ms_meta(config: dict, cell: str, inventory) -> list[str]:
    """The --meta flags of a matched cell: where it sits in the campaign and what it holds fixed."""
    ms = config["matched_source"]
    arm, block = ms_cell(cell)
    order = ms["pairs"][block - 1] if block else ""
    return meta_flags(ms_digest(config), dict(
        campaign="matched", arm=ms["policy"], source_arm=arm, block=block, order=order,
        position=ms_sequence(config).index(cell), r=ratio_str(ms["ratio"]), rep=1, threads=ms["threads"],
        t_repr_bytes=pm_t_repr(inventory)))


# ---- reclaim authority (reference 000, claim 3) --------------------------------------------

RECLAIM_RUNS = "results/runs/reclaim"
RECLAIM_ARMS = ("unprotected", "protected")
SWAP_DIR = "results/swap"


def reclaim_digest(config: dict) -> str:
    """The reclaim cells depend on the synthetic study (region, chunk size, source, the
    calibrated O) and their own section."""
    return digest(run_sections(config) | {"pager_synthetic": config["pager_synthetic"], "reclaim": config["reclaim"]})


def reclaim_cells(config: dict) -> list[str]:
    rc = config["reclaim"]
    return [f"{RECLAIM_RUNS}/{arm}/rep{k}/harness.json" for k in _reps(rc["reps"]) for arm in RECLAIM_ARMS]


def reclaim_budget(config: dict) -> int:
    return budget_bytes(config, config["reclaim"]["ratio"])


def reclaim_scan_args(config: dict, protection: str) -> list[str]:
    """The scan of a reclaim cell: the synthetic study's arm at the reclaim ratio, its own
    passes and watchdog, and --protect in the protected arm."""
    if protection not in RECLAIM_ARMS:
        raise ValueError(f"reclaim arm {protection!r} not in {RECLAIM_ARMS}")
    rc = config["reclaim"]
    args = scan_args(config, rc["arm"], rc["ratio"], 1, 0, "all-threads-finished", rc["passes"], rc["watchdog_s"])
    return args + opts(protect=protection == "protected")


def reclaim_harness_args(config: dict) -> list[str]:
    """The harness flags that make a cell a reclaim cell: pressure at O + fraction x budget,
    and a swap file for the cell only."""
    rc = config["reclaim"]
    return opts(budget_bytes=reclaim_budget(config), reclaim_fraction=rc["pressure_fraction"],
                swap_bytes=rc["swap_bytes"], swap_dir=SWAP_DIR)


def reclaim_meta(config: dict, protection: str, rep) -> list[str]:
    rc = config["reclaim"]
    return meta_flags(reclaim_digest(config), {"campaign": "reclaim", "arm": rc["arm"], "protection": protection,
                                               "r": ratio_str(rc["ratio"]), "rep": rep})


# ---- the memory-sovereignty certificate (reference 004 §2.1, §5.2; claim C1) ------------

CERT_RUNS = "results/runs/certificate"
CERT_TABLE = "results/certificate.parquet"
CERT_CELLS = ("oracle", "certified")


def cert_model(config: dict) -> str:
    """The certified execution's GGUF: the synthetic MoE written by the model rules, or a
    GGUF of the user's (`user:<name>`, declared under models.user)."""
    return cert_model_files(config)[0]


def cert_model_files(config: dict) -> tuple[str, str]:
    """(GGUF path, identity record) of the certified execution's model."""
    m = config["certificate"]["model"]
    if m.startswith(USER_PREFIX):
        n = m[len(USER_PREFIX):]
        return _user_entry(config, n)["path"], user_identity(n)
    g = synthetic_gguf(m.split("-", 1)[1])
    return g, model_identity(g)


def cert_digest(config: dict) -> str:
    c = config["certificate"]
    m = c["model"]
    model = (_user_entry(config, m[len(USER_PREFIX):]) if m.startswith(USER_PREFIX)
             else synthetic_section(config, m.split("-", 1)[1]))
    return digest(run_sections(config) | {"certificate": c, "model": model})


def cert_run(cell: str) -> str:
    return f"{CERT_RUNS}/{cell}/harness.json"


def cert_record() -> str:
    """certificate.json, beside the certified run's directory (not in it: the run's
    manifest stays the run's own)."""
    return f"{CERT_RUNS}/certificate.json"


def cert_generate_args(config: dict, cell: str, model: str) -> list[str]:
    """The certified run: its arm at its weight budget; the oracle: the same build's
    zero-cache arm (every step refilled), same budget, no host limit."""
    c = config["certificate"]
    arm = c["arm"] if cell == "certified" else "pager-zero"
    return opts(model=model, arm=arm, budget_bytes=c["budget_bytes"], chunk_size=c["chunk_bytes"],
                tokens=c["tokens"], ctx=c["ctx"], threads=config["pager_model"]["threads"],
                watchdog_s=c["watchdog_s"], eager_reconcile=True)


def cert_harness_args(config: dict, cell: str) -> list[str]:
    """H_cap for the certified run (the oracle has none), and the declared GPU allowance."""
    c = config["certificate"]
    cap = c["host_cap_bytes"] if cell == "certified" else None
    return (opts(limit_bytes=cap, gpu_declared_bytes=c["gpu_declared_bytes"], gpu_interval_s=c["gpu_interval_s"])
            + meta_flags(cert_digest(config), {"campaign": "certificate", "cell": cell}))
