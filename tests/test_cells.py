"""residency.campaigns.cells: the paths, flags, --meta values and config digests the rules hand to
the harness and residctl. The pinned strings were produced by workflow/rules/common.smk
before its logic moved to residency.campaigns.cells, so a change to any of them is a change to what
the runs are asked to do (and to their config digests): make it on purpose. (Changed on
purpose for issue 14: every digest covers engine, llama and harness, the real-model ones the
model's entry too, the matched cells' matched_source; pager arms check their fills against
content digests.)"""

import copy
import json
import shlex

import pytest

from residency.core import arms, config
from residency.campaigns import bounded_source, cells

from conftest import ROOT

# harness.overhead_margin added (every run's digest); matched_source.ratio 0.244, reserve_bytes gone;
# pager_model.chunk_bytes 512 KiB, huge_chunks off
PS_DIGEST = "8dfd8947b5781d93d80073607976606e970a4b88eec9972e26a00953fe282e58"
PM_DIGEST = "32d132cb7a92ab390c97e418705d47b0b4f7a3bec690a86b555f64ae7741e7a4"
MS_DIGEST = "f79012ac077a5c0c08ecc41d6cd8a7a2e79852c628e99882ec839790e79f07b5"
REGION = "results/regions/synthetic-134217728-s1.bin"
REGION_DIGESTS = f"--content-digests {REGION}.chunks-2097152.json"
MODEL_DIGESTS = "--content-digests results/models/SmolLM2-135M-Instruct.Q4_1.chunks-524288.json"
GENERATE = ("--model m.gguf --arm {arm} --chunk-size 524288 --tokens 64 --threads 2 --ctx 512 --watchdog-s 300"
            " --graph-plan results/runs/pager_model/smollm2/graph-plan/graph-plan.json")
SCAN = (f"--region {REGION} --seed 1 --arm {{arm}} --chunk-size 2097152 --passes 3 --threads {{t}} "
        "--compute-us {c} --signal {s} --watchdog-s 60")


@pytest.fixture(scope="module")
def cfg():
    return config.load(ROOT / "config" / "config.yaml")


@pytest.fixture
def inventory(tmp_path):
    p = tmp_path / "m.inventory.json"
    p.write_text(json.dumps({"tensor_bytes": 91234567}))
    return p


def test_default_digests_and_paths(cfg):
    assert (cells.ps_digest(cfg), cells.pm_digest(cfg), cells.ms_digest(cfg)) == (PS_DIGEST, PM_DIGEST, MS_DIGEST)
    assert cells.residctl(cfg) == ".build/engine/residctl"
    assert (cells.region(cfg), cells.region_identity(cfg)) == (REGION, REGION + ".json")
    assert cells.pm_model(cfg) == ("results/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                                   "results/models/SmolLM2-135M-Instruct.Q4_1.json",
                                   "results/models/SmolLM2-135M-Instruct.Q4_1.inventory.json")
    assert cells.run_dir(["a/b/harness.json"]) == "a/b"


def test_default_cells(cfg):
    main, stress, pm = cells.main_cells(cfg), cells.stress_cells(cfg), cells.pm_cells(cfg)
    assert (len(main), len(stress), len(pm)) == (60, 72, 60)
    assert main[0] == "results/runs/pager_synthetic/main/kernel-mmap/r0.25/rep1/harness.json"
    assert main[-1] == "results/runs/pager_synthetic/main/pager-prefetch/r0.75/rep3/harness.json"
    assert stress[-1] == "results/runs/pager_synthetic/stress/pager-declared/thread0-started/t4-c200/rep3/harness.json"
    assert pm[-1] == "results/runs/pager_model/smollm2/pager-prefetch/r0.75/rep3/harness.json"
    assert cells.pm_baselines(cfg)[-1] == "results/runs/pager_model/smollm2/baseline/rep3/harness.json"
    assert cells.calibration_arms(cfg) == ["kernel-mmap", "pager-declared", "pager-lru", "pager-prefetch"]
    runs = cells.calibration_runs(cfg, "2")
    assert len(runs) == 12 and runs[3] == "results/runs/pager_synthetic/calibrate/pager-declared/t2/rep1/harness.json"
    runs = cells.pm_calibration_runs(cfg)
    assert len(runs) == 12 and runs[3] == "results/runs/pager_model/smollm2/calibrate/pager-lru/rep1/harness.json"


def test_default_scan_flags(cfg):
    assert shlex.join(cells.scan_args(cfg, "pager-lru", 0.25, 1, 0, "all-threads-finished")) == (
        SCAN.format(arm="pager-lru", t=1, c=0, s="all-threads-finished")
        + f" --budget-bytes 33554432 --source direct --prefetch-depth 2 {REGION_DIGESTS}")
    assert shlex.join(cells.scan_args(cfg, "pager-lru", 0.5, "4", "200", "thread0-started")) == (
        SCAN.format(arm="pager-lru", t=4, c=200, s="thread0-started")
        + f" --budget-bytes 67108864 --source direct --prefetch-depth 2 {REGION_DIGESTS}")
    # arm A runs on plain mmap: no pager flags
    assert shlex.join(cells.scan_args(cfg, "kernel-mmap", 0.5, 1, 0, "all-threads-finished")) == SCAN.format(
        arm="kernel-mmap", t=1, c=0, s="all-threads-finished")
    assert shlex.join(cells.harness_meta(cfg, campaign="main", arm="pager-lru", r="0.25", rep="1", threads=1, compute_us=0,
                              signal="all-threads-finished")) == (
        "--meta campaign=main --meta arm=pager-lru --meta r=0.25 --meta rep=1 --meta threads=1 --meta compute_us=0"
        f" --meta signal=all-threads-finished --meta config_digest={PS_DIGEST}")


def test_stress_cells_run_free_with_jitter_in_the_compute_phase(cfg):
    budget = " --budget-bytes 67108864 --source direct --prefetch-depth 2 " + REGION_DIGESTS
    assert shlex.join(cells.stress_scan_args(cfg, "pager-declared", "4", "200", "thread0-started")) == (
        SCAN.format(arm="pager-declared", t=4, c=200, s="thread0-started") + budget
        + " --sync none --jitter-us 400 --jitter-seed 1")
    # no compute phase, no jitter: the "concurrency without compute" control
    assert shlex.join(cells.stress_scan_args(cfg, "pager-lru", "2", "0", "all-threads-finished")) == (
        SCAN.format(arm="pager-lru", t=2, c=0, s="all-threads-finished") + budget
        + " --sync none --jitter-us 0 --jitter-seed 1")
    assert shlex.join(cells.stress_meta(cfg, "pager-lru", "2", "200", "thread0-started", "3")) == (
        "--meta campaign=stress --meta arm=pager-lru --meta r=0.5 --meta rep=3 --meta threads=2 --meta compute_us=200"
        " --meta signal=thread0-started --meta sync=none --meta jitter_us=400"
        f" --meta config_digest={PS_DIGEST}")


def test_default_generate_flags(cfg, inventory):
    assert cells.pm_t_repr(inventory) == 91234567 and cells.pm_budget(inventory, 0.375) == 34212962
    assert shlex.join(cells.generate_args(cfg, "m.gguf", "pager-prefetch", cells.pm_budget(inventory, 0.375))) == (
        GENERATE.format(arm="pager-prefetch")
        + f" --budget-bytes 34212962 --source direct --prefetch-depth 2 --huge-chunks off --consumption tensor {MODEL_DIGESTS}")
    assert shlex.join(cells.generate_args(cfg, "m.gguf", "kernel-mmap", None)) == GENERATE.format(arm="kernel-mmap")
    assert shlex.join(cells.generate_args(cfg, "m.gguf", "pager-lru", 123, source="buffered")).endswith(
        f"--budget-bytes 123 --source buffered --prefetch-depth 2 --huge-chunks off --consumption tensor {MODEL_DIGESTS}")
    assert shlex.join(cells.pm_meta(cfg, campaign="main", arm="pager-lru", r="0.25", rep="1", t_repr_bytes=91234567)) == (
        "--meta campaign=main --meta arm=pager-lru --meta r=0.25 --meta rep=1 --meta t_repr_bytes=91234567"
        f" --meta config_digest={PM_DIGEST}")


def test_default_matched_cells(cfg, inventory):
    seq = cells.ms_sequence(cfg)
    assert seq[:5] == ["oracle", "P", "pair1/D", "pair1/F", "pair2/D"] and seq[6:8] == ["pair3/F", "pair3/D"]
    assert cells.ms_cells(cfg)[2] == "results/runs/matched_source/smollm2/pair1/D/harness.json"
    assert cells.ms_previous(cfg, "pair1/D") == ["results/runs/matched_source/smollm2/P/harness.json"]
    assert cells.ms_previous(cfg, "oracle") == []
    # the weight allowance 0.244 x T_repr; D and P leave F's seven extra windows out
    assert cells.ms_host_budget(cfg, inventory) == 22261234
    assert [cells.ms_pager_budget(cfg, c, inventory) for c in ("oracle", "P", "pair1/D", "pair1/F")] == [
        18591218, 18591218, 18591218, 22261234]
    # The matched cells run matched_source.threads (1: a core left to the source), not pager_model's 2.
    common = GENERATE.format(arm="pager-declared").replace("--threads 2", "--threads 1")
    assert cfg["pager_model"]["threads"] == 2 and cfg["matched_source"]["threads"] == 1
    assert shlex.join(cells.ms_generate_args(cfg, "pair1/F", "m.gguf", 22261234)) == (
        common + f" --budget-bytes 22261234 --source uring --prefetch-depth 2 --huge-chunks off --consumption tensor {MODEL_DIGESTS}"
        " --windows 8 --depth 8")
    assert shlex.join(cells.ms_generate_args(cfg, "oracle", "m.gguf", 18591218)) == (
        common + f" --budget-bytes 18591218 --source direct --prefetch-depth 2 --huge-chunks off --consumption tensor {MODEL_DIGESTS}")
    assert shlex.join(cells.ms_meta(cfg, "pair1/F", inventory)) == (
        "--meta campaign=matched --meta arm=pager-declared --meta source_arm=F --meta block=1 --meta order=D-F"
        " --meta position=3 --meta r=0.244 --meta rep=1 --meta threads=1 --meta t_repr_bytes=91234567"
        f" --meta config_digest={MS_DIGEST}")
    assert shlex.join(cells.ms_meta(cfg, "P", inventory)).startswith(
        "--meta campaign=matched --meta arm=pager-declared --meta source_arm=P --meta block=0 --meta order="
        " --meta position=1 ")


def test_matched_threads_reach_every_matched_cell_only(cfg, inventory):
    c = copy.deepcopy(cfg)
    c["matched_source"]["threads"] = 3
    for cell in cells.ms_sequence(c):
        assert "--threads 3 " in shlex.join(cells.ms_generate_args(c, cell, "m.gguf", 1)), cell
        assert " --meta threads=3 " in shlex.join(cells.ms_meta(c, cell, inventory)), cell
    assert "--threads 2 " in shlex.join(cells.generate_args(c, "m.gguf", "pager-lru", 1))  # pager_model's own cells
    assert cells.ms_digest(c) != MS_DIGEST and cells.pm_digest(c) == PM_DIGEST


def test_eager_reconcile_closes_every_pager_flag_list(cfg):
    c = copy.deepcopy(cfg)
    c["pager_synthetic"]["eager_reconcile"] = c["pager_model"]["eager_reconcile"] = True
    assert shlex.join(cells.scan_args(c, "pager-lru", 0.25, 1, 0, "all-threads-finished")).endswith(
        f"--prefetch-depth 2 {REGION_DIGESTS} --eager-reconcile")
    assert shlex.join(cells.scan_args(c, "kernel-mmap", 0.25, 1, 0, "all-threads-finished")).endswith(
        "--watchdog-s 60 --eager-reconcile")
    assert shlex.join(cells.ms_generate_args(c, "pair1/F", "m.gguf", 1)).endswith(
        f"--huge-chunks off --consumption tensor {MODEL_DIGESTS} --eager-reconcile --windows 8 --depth 8")
    assert cells.ps_digest(c) != PS_DIGEST and cells.pm_digest(c) != PM_DIGEST


def test_other_models(cfg):
    c = copy.deepcopy(cfg)
    c["pager_model"]["models"] = ["synthetic-moe"]
    assert cells.pm_model(c) == ("results/models/synthetic-moe.gguf", "results/models/synthetic-moe.json",
                                 "results/models/synthetic-moe.inventory.json")
    c["pager_model"]["models"] = ["user:big"]
    c["models"]["user"] = [{"name": "big", "path": "/data/big.gguf", "sha256": "b" * 64}]
    assert cells.pm_model(c) == ("/data/big.gguf", "results/models/user/big.json",
                                 "results/models/user/big.inventory.json")
    assert cells.pm_name(c) == "big" and cells.ms_runs(c) == "results/runs/matched_source/big"


def _sweep(cfg):
    c = copy.deepcopy(cfg)
    c["pager_model"]["models"] = ["smollm2", "user:big", "synthetic-moe"]
    c["models"]["user"] = [{"name": "big", "path": "/data/big.gguf", "sha256": "b" * 64}]
    return c


def test_sweep_paths(cfg):
    c = _sweep(cfg)
    assert cells.pm_names(c) == ["smollm2", "big", "synthetic-moe"] and cells.sweep_names(c) == ["big", "synthetic-moe"]
    # the primary's paths and digests are the single model's, whatever follows it
    assert (cells.pm_name(c), cells.pm_digest(c), cells.ms_digest(c)) == ("smollm2", PM_DIGEST, MS_DIGEST)
    assert (cells.pm_parquet(c, "smollm2"), cells.pm_opt(c, "smollm2")) == (
        "results/pager_model.parquet", "results/pager_model_opt.parquet")
    assert cells.pm_table_stem(c, "smollm2") == "results/tables/pager-model"
    assert cells.pm_claim(c, "smollm2", "P7") == "claims/P7.json"
    big = cells.model_view(c, "big")
    assert big["pager_model"]["model"] == "user:big" and "models" not in big["pager_model"]
    assert cells.model_view(big) is big
    assert cells.pm_model(big) == ("/data/big.gguf", "results/models/user/big.json",
                                   "results/models/user/big.inventory.json")
    assert cells.pm_cells(big)[-1] == "results/runs/pager_model/big/pager-prefetch/r0.75/rep3/harness.json"
    assert cells.pm_calibration_runs(big)[0] == "results/runs/pager_model/big/calibrate/kernel-mmap/rep1/harness.json"
    assert cells.pm_graph_plan(big) == "results/runs/pager_model/big/graph-plan/graph-plan.json"
    assert (cells.pm_parquet(c, "big"), cells.pm_opt(c, "big")) == (
        "results/sweep/big/pager_model.parquet", "results/sweep/big/pager_model_opt.parquet")
    assert cells.pm_table_stem(c, "big") == "results/sweep/big/tables/pager-model"
    assert cells.pm_claim(c, "synthetic-moe", "P7") == "claims/models/synthetic-moe/P7.json"
    assert shlex.join(cells.generate_args(big, "m.gguf", "kernel-mmap", None)).endswith(
        "--graph-plan results/runs/pager_model/big/graph-plan/graph-plan.json")


def test_sweep_digests_are_per_model(cfg):
    """A model's runs depend on its own entry only: adding, removing or reordering the other
    models of the list reruns none of its runs."""
    c = _sweep(cfg)
    alone = copy.deepcopy(c)
    alone["pager_model"]["models"] = ["user:big"]
    assert cells.pm_digest(cells.model_view(c, "big")) == cells.pm_digest(alone)
    moe = cells.model_view(c, "synthetic-moe")
    assert len({cells.pm_digest(c), cells.pm_digest(cells.model_view(c, "big")), cells.pm_digest(moe)}) == 3
    c["models"]["user"][0]["sha256"] = "c" * 64  # big's entry changes: big's runs, not the others'
    assert cells.pm_digest(moe) == cells.pm_digest(cells.model_view(c, "synthetic-moe"))
    assert cells.pm_digest(c) == PM_DIGEST


def test_missing_sweep_model(cfg, tmp_path):
    c = _sweep(cfg)
    c["models"]["user"][0]["path"] = str(tmp_path / "big.gguf")
    assert cells.missing_model(c) == f"model error: pager_model.models user:big: {tmp_path / 'big.gguf'}: missing"


def test_matched_cell_names(cfg):
    import re

    for cell in cells.ms_sequence(cfg):
        assert re.fullmatch(cells.MS_CELL_PATTERN, cell)
    assert cells.ms_cell("pair12/F") == (arms.ASYNC, 12)
    assert cells.ms_cell("oracle") == (arms.ORACLE, 0) and cells.ms_cell("P") == (arms.BUFFERED, 0)
    c = copy.deepcopy(cfg)
    c["matched_source"]["pairs"] = ["F-D", "D-F"]
    assert cells.ms_sequence(c) == ["oracle", "P", "pair1/F", "pair1/D", "pair2/D", "pair2/F"]


def test_ratio_str():
    assert [cells.ratio_str(r) for r in (0.5, "0.50", 0.375, 1)] == ["0.5", "0.5", "0.375", "1"]


# ---- provenance: what each campaign's config digest covers --------------------------------

def _leaves(obj, path=()):
    """Every leaf of a config (lists are leaves: a changed list is a changed setting)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    else:
        yield path


def _perturbed(cfg, path):
    c = copy.deepcopy(cfg)
    node = c
    for k in path[:-1]:
        node = node[k]
    v = node[path[-1]]
    node[path[-1]] = (not v if isinstance(v, bool) else v + 1 if isinstance(v, (int, float))
                      else v + "x" if isinstance(v, str) else [*v, "x"] if isinstance(v, list) else "x")
    return c


def _digests(c):
    return {"ps": cells.ps_digest(c), "pm": cells.pm_digest(c), "ms": cells.ms_digest(c),
            "bs": bounded_source.digest_of(c)}


def _expected(path, model, bs):
    """The campaigns whose runs a setting changes (config/README.md, "config digest")."""
    top = path[0]
    if top in ("engine", "llama", "harness"):
        return {"ps", "pm", "ms", "bs"}
    if top == "pager_synthetic":
        return {"ps"}
    if top == "pager_model":
        return set() if path[1] in cells.DIGEST_EXEMPT else {"pm", "ms"}
    if top == "matched_source":
        return {"ms"}
    if top == "bounded_source":
        return {"bs"}
    if top == "models":
        return _model_users(path, model, bs)
    return set()  # claims: no run depends on them


def _model_users(path, model, bs):
    """A models.* leaf changes the runs of the models written from it: a synthetic variant's
    shape only that variant's (the bounded-source campaign runs synthetic-sparse-moe), the
    shared synthetic keys every synthetic model's."""
    users = set()
    if path[1] == "synthetic":
        shared = path[2] in ("seed", "tensor_type", "alignment")
        if (shared and model.startswith("synthetic-")) or f"synthetic-{path[2]}" == model:
            users |= {"pm", "ms"}
        if shared or f"synthetic-{path[2]}" == bs:
            users.add("bs")
    elif path[1] == model:
        users |= {"pm", "ms"}
    return users


@pytest.mark.parametrize("model", ["smollm2", "synthetic-dense"])
def test_every_setting_changes_the_digests_of_exactly_the_runs_that_use_it(cfg, model):
    base_cfg = copy.deepcopy(cfg)
    base_cfg["pager_model"]["models"] = [model]
    base = _digests(base_cfg)
    # the sweep: see below; the bounded-source model is a name, changed to another model below
    leaves = [p for p in _leaves(base_cfg) if p not in (("pager_model", "models"), ("bounded_source", "model"))]
    assert len(leaves) > 80  # the whole config, not a sample
    for path in leaves:
        now = _digests(_perturbed(base_cfg, path))
        changed = {k for k in base if now[k] != base[k]}
        assert changed == _expected(path, model, bounded_source.model(base_cfg)), path
    other = copy.deepcopy(base_cfg)
    other["bounded_source"]["model"] = "synthetic-dense"
    assert {k for k, v in _digests(other).items() if v != base[k]} == {"bs"}


def test_a_matched_key_changes_the_matched_cells_digest_only(cfg, inventory):
    c = copy.deepcopy(cfg)
    c["matched_source"]["depth"] -= 1
    assert cells.ms_digest(c) != MS_DIGEST
    assert (cells.ps_digest(c), cells.pm_digest(c)) == (PS_DIGEST, PM_DIGEST)
    assert shlex.join(cells.ms_meta(c, "pair1/D", inventory)).endswith(f"--meta config_digest={cells.ms_digest(c)}")
    # switching the model, or its user entry's sha256, is a change of every model run
    c["pager_model"]["models"] = ["user:big"]
    c["models"]["user"] = [{"name": "big", "path": "/data/big.gguf", "sha256": "b" * 64}]
    d = cells.pm_digest(c)
    c["models"]["user"][0]["sha256"] = "c" * 64
    assert len({PM_DIGEST, d, cells.pm_digest(c)}) == 3


# ---- the consumption signal: pager arms only ----------------------------------------------

def test_the_consumption_signal_goes_to_every_pager_cell_and_never_to_arm_a(cfg, inventory):
    assert "--consumption tensor" in shlex.join(cells.generate_args(cfg, "m.gguf", "pager-declared", 123))
    assert "--consumption tensor" in shlex.join(cells.ms_generate_args(cfg, "pair1/F", "m.gguf", 123))
    assert "--consumption" not in shlex.join(cells.generate_args(cfg, "m.gguf", "kernel-mmap", None))
    c = copy.deepcopy(cfg)
    c["pager_model"]["consumption"] = "object"
    assert "--consumption object" in shlex.join(cells.generate_args(c, "m.gguf", "pager-lru", 123))
    assert cells.pm_digest(c) != PM_DIGEST and cells.ms_digest(c) != MS_DIGEST


# ---- content digests: the flags the cells pass ---------------------------------------------

def test_content_digest_flags_follow_content_check(cfg):
    assert cells.ps_content_digests(cfg) == f"{REGION}.chunks-2097152.json"
    assert cells.pm_content_digests(cfg) == "results/models/SmolLM2-135M-Instruct.Q4_1.chunks-524288.json"
    c = copy.deepcopy(cfg)
    c["pager_model"]["models"] = ["user:big"]
    c["models"]["user"] = [{"name": "big", "path": "/data/big.gguf", "sha256": "b" * 64}]
    assert cells.pm_content_digests(c) == "results/models/user/big.chunks-524288.json"
    assert cells.model_gguf(c, "user/big") == "/data/big.gguf"
    assert cells.model_gguf(c, "synthetic-moe") == "results/models/synthetic-moe.gguf"
    # arm A fills nothing: never the flag
    assert "--content-digests" not in shlex.join(cells.scan_args(cfg, "kernel-mmap", 0.5, 1, 0, "all-threads-finished"))
    assert "--content-digests" not in shlex.join(cells.generate_args(cfg, "m.gguf", "kernel-mmap", None))
    c["pager_synthetic"]["content_check"] = c["pager_model"]["content_check"] = False
    assert cells.ps_content_digests(c) is None and cells.pm_content_digests(c) is None
    for args in (shlex.join(cells.scan_args(c, "pager-lru", 0.5, 1, 0, "all-threads-finished")),
                 shlex.join(cells.generate_args(c, "m.gguf", "pager-declared", 123)),
                 shlex.join(cells.ms_generate_args(c, "pair1/F", "m.gguf", 123))):
        assert "--content-digests" not in args and "--budget-bytes" in args
    # absent key: on (the documented default)
    del c["pager_model"]["content_check"]
    assert cells.content_check(c["pager_model"]) and "--content-digests" in shlex.join(cells.generate_args(c, "m", "pager-lru", 1))


def test_missing_user_model_is_one_line(cfg, tmp_path):
    c = copy.deepcopy(cfg)
    assert cells.missing_model(c) is None  # smollm2 is fetched by a rule
    c["pager_model"]["models"] = ["user:big"]
    c["models"]["user"] = [{"name": "big", "path": str(tmp_path / "big.gguf"), "sha256": "b" * 64}]
    assert cells.missing_model(c) == f"model error: pager_model.models user:big: {tmp_path / 'big.gguf'}: missing"
    (tmp_path / "big.gguf").mkdir()
    assert cells.missing_model(c).endswith("big.gguf: not a regular file")
    (tmp_path / "big.gguf").rmdir()
    (tmp_path / "big.gguf").write_bytes(b"GGUF")
    assert cells.missing_model(c) is None
    assert cells.existing(str(tmp_path / "big.gguf")) == [str(tmp_path / "big.gguf")]
    assert cells.existing(str(tmp_path / "nope.gguf")) == []


def test_reclaim_cells_pair_the_pager_with_and_without_protection(cfg):
    assert cells.reclaim_cells(cfg) == [f"results/runs/reclaim/{a}/rep{k}/harness.json"
                                        for k in (1, 2, 3) for a in ("unprotected", "protected")]
    base = (f"--region {REGION} --seed 1 --arm pager-declared --chunk-size 2097152 --passes 3 --threads 1 "
            "--compute-us 0 --signal all-threads-finished --watchdog-s 600 --budget-bytes 67108864 --source direct "
            f"--prefetch-depth 2 {REGION_DIGESTS}")
    assert shlex.join(cells.reclaim_scan_args(cfg, "unprotected")) == base
    assert shlex.join(cells.reclaim_scan_args(cfg, "protected")) == base + " --protect"
    with pytest.raises(ValueError):
        shlex.join(cells.reclaim_scan_args(cfg, "half"))
    assert shlex.join(cells.reclaim_harness_args(cfg)) == ("--budget-bytes 67108864 --reclaim-fraction 0.5 "
                                               "--swap-bytes 268435456 --swap-dir results/swap")
    digest = cells.reclaim_digest(cfg)
    assert shlex.join(cells.reclaim_meta(cfg, "protected", 2)) == (
        "--meta campaign=reclaim --meta arm=pager-declared --meta protection=protected --meta r=0.5 --meta rep=2"
        f" --meta config_digest={digest}")
    # its digest follows the synthetic study and its own section, and nothing else's
    c = copy.deepcopy(cfg)
    c["reclaim"]["pressure_fraction"] = 0.4
    assert cells.reclaim_digest(c) != digest and cells.ps_digest(c) == PS_DIGEST
    c = copy.deepcopy(cfg)
    c["pager_synthetic"]["seed"] = 2
    assert cells.reclaim_digest(c) != digest
    c = copy.deepcopy(cfg)
    c["pager_model"]["tokens"] = 8
    assert cells.reclaim_digest(c) == digest


def test_the_certificate_may_name_a_user_model(cfg):
    """certificate.model: the synthetic MoE (default) or user:<name>, with that model's
    records and its entry in the certified runs' digest."""
    assert cells.cert_model_files(cfg) == ("results/models/synthetic-moe.gguf", "results/models/synthetic-moe.json")
    c = copy.deepcopy(cfg)
    c["certificate"]["model"] = "user:big"
    c["models"]["user"] = [{"name": "big", "path": "/data/big.gguf", "sha256": "b" * 64}]
    assert cells.cert_model_files(c) == ("/data/big.gguf", "results/models/user/big.json")
    assert cells.cert_model(c) == "/data/big.gguf" and cells.cert_digest(c) != cells.cert_digest(cfg)
    c["models"]["user"][0]["sha256"] = "c" * 64
    assert cells.cert_digest(c) != cells.cert_digest(cfg)
