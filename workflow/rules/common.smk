# Shared names: paths, the campaign's cells and the config digest.

from residency.identity import digest

RESIDCTL = f"{config['engine']['build_dir']}/residctl"
PS = config["pager_synthetic"]
PS_DIGEST = digest({"engine": config["engine"], "pager_synthetic": PS})
REGION = f"results/regions/synthetic-{PS['region_bytes']}-s{PS['seed']}.bin"
RUNS = "results/runs/pager_synthetic"


def ratio_str(r):
    return f"{float(r):g}"


def budget_bytes(r):
    """The weight-residency budget r * T_repr, in whole bytes."""
    return int(float(r) * PS["region_bytes"])


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
CALIBRATION_THREADS = sorted({PS["main"]["threads"], *PS["stress"]["threads"]})


wildcard_constraints:
    arm="kernel-mmap|pager-lru|pager-declared|pager-prefetch|pager-zero",
    signal="all-threads-finished|thread0-started",
    r=r"[0-9.]+",
    rep=r"\d+",
    threads=r"\d+",
    compute=r"\d+",
