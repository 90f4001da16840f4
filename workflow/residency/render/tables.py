"""Paper tables: one function per table, each computed from Parquet and written as CSV,
Markdown and LaTeX side by side (atomically)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from residency.core import arms, atomic
from residency.analysis.pairs import matched_pairs

# Row labels, {letter} standing for the arm's reference letter (tables say "D (declared)").
ARM_ROW = {arms.KERNEL_MMAP: "{letter} (kernel mmap)", arms.PAGER_LRU: "{letter} (LRU)",
           arms.PAGER_DECLARED: "{letter} (declared)", arms.PAGER_PREFETCH: "{letter} (prefetch)",
           arms.PAGER_ZERO: "no reuse"}


def arm_row(arm: str) -> str:
    """The table label of an arm; a name outside the vocabulary stands as it is."""
    return arms.labelled(arm, ARM_ROW[arm]) if arm in ARM_ROW else arm


def write_table(df: pd.DataFrame, stem: str | os.PathLike, caption: str, printed: pd.DataFrame | None = None) -> None:
    """CSV of `df`; Markdown and LaTeX of `printed` where given (e.g. digests abbreviated for
    print, the CSV keeping them whole), else of `df`."""
    stem = Path(stem)
    atomic.write_text(stem.with_suffix(".csv"), df.to_csv(index=False))
    df = df if printed is None else printed
    atomic.write_text(stem.with_suffix(".md"), _markdown(df, caption))
    tex = df.to_latex(index=False, caption=caption, escape=True, float_format="%.4g")
    atomic.write_text(stem.with_suffix(".tex"), tex)


def _markdown(df: pd.DataFrame, caption: str) -> str:
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = [f"<!-- {caption} -->", "| " + " | ".join(df.columns) + " |",
             "|" + "|".join("---" for _ in df.columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def pager_synthetic_summary(runs_parquet, opt_parquet, stem) -> pd.DataFrame:
    """Per arm and r (main campaign): demand miss rate, evictions, bytes per pass against
    OPT's, wall time, cgroup peak and limit. OPT is at each run's own capacity (the pager's
    budget_chunks; floor(r*T/chunk) for arm A)."""
    runs = pd.read_parquet(runs_parquet)
    opt = pd.read_parquet(opt_parquet)[["run_dir", "opt_misses", "capacity_chunks"]]
    main = runs[runs["campaign"] == "main"].merge(opt, on="run_dir", how="left")
    per_pass = main["passes"] * main["region_bytes"]
    main["bytes_per_pass"] = main["physical_bytes_read"] / per_pass
    main["opt_bytes_per_pass"] = main["opt_misses"] * main["chunk_bytes"] / per_pass
    g = main.groupby(["arm", "r"]).agg(
        reps=("rep", "count"), ok=("status", lambda s: int((s == "ok").sum())),
        capacity_chunks=("capacity_chunks", "max"),
        miss_rate=("miss_rate", "mean"), misses=("misses", "mean"), opt_misses=("opt_misses", "mean"),
        evictions=("evictions", "mean"), bytes_per_pass=("bytes_per_pass", "mean"), opt_bytes_per_pass=("opt_bytes_per_pass", "mean"),
        wall_ms=("wall_ns", lambda s: s.mean() / 1e6), peak_mib=("peak_bytes", lambda s: s.max() / 2**20),
        limit_mib=("limit_bytes", lambda s: s.max() / 2**20),
    ).reset_index()
    g["bytes_over_opt"] = g["bytes_per_pass"] / g["opt_bytes_per_pass"]
    g.insert(0, "arm_row", g["arm"].map(arm_row))
    g = g.drop(columns=["arm"]).sort_values(["arm_row", "r"])
    write_table(g, stem, "Synthetic cyclic scan: per arm and budget ratio r, means over repetitions")
    return g


def pager_model_summary(runs_parquet, opt_parquet, stem, roofline=None) -> pd.DataFrame:
    """Per arm and r on the real model: validity, bytes, misses against OPT, throughput,
    fault tail, cgroup peak and limit; the unconstrained baseline as its own rows. With the
    roofline calibration table: the bound at r and each arm's median tokens/s over it."""
    runs = pd.read_parquet(runs_parquet)
    opt = pd.read_parquet(opt_parquet)[["run_dir", "opt_misses"]]
    df = runs.merge(opt, on="run_dir", how="left")
    df["r"] = df["r"].fillna(float("nan"))
    df["bytes_per_token_over_t"] = df["physical_bytes_per_token"] / df["t_repr_bytes"]
    g = df.groupby(["campaign", "arm", "r"], dropna=False).agg(
        reps=("rep", "count"), valid=("valid", "sum"), exact=("exact", "sum"),
        gb_per_run=("physical_bytes_read", lambda s: s.mean() / 1e9),
        bytes_per_token_over_t=("bytes_per_token_over_t", "mean"),
        misses=("misses", "mean"), opt_misses=("opt_misses", "mean"),
        tokens_per_s=("tokens_per_s", "mean"), fault_p99_us=("fault_p99_ns", lambda s: s.mean() / 1e3),
        peak_mib=("peak_bytes", lambda s: s.max() / 2**20), limit_mib=("limit_bytes", lambda s: s.max() / 2**20),
    ).reset_index()
    g["misses_over_opt"] = g["misses"] / g["opt_misses"]
    caption = "Real model through the pager: per arm and budget ratio r, means over repetitions"
    if roofline is not None:
        from residency.analysis import roofline as rl

        roof, frac = rl.from_parquet(runs_parquet, opt_parquet, roofline)
        frac = frac.assign(campaign="main")[["campaign", "arm", "r", "roofline_tokens_per_s", "fraction_of_roofline"]]
        g = g.merge(frac, on=["campaign", "arm", "r"], how="left")
        caption += (f"; roofline = min(compute {roof['compute_tokens_per_s'].iloc[0]:.1f} tok/s, "
                    f"bandwidth {roof['bandwidth_bytes_per_s'].iloc[0] / 1e9:.2f} GB/s / OPT bytes per token), "
                    "fraction = median tokens/s / roofline") if not roof.empty else ""
    g.insert(0, "arm_row", [("baseline (unconstrained)" if c == "baseline" else arm_row(a))
                            for c, a in zip(g["campaign"], g["arm"])])
    g = g.drop(columns=["campaign", "arm"]).sort_values(["arm_row", "r"], na_position="first")
    write_table(g, stem, caption)
    return g


def table6_matched_pairs(runs_parquet, _unused, stem) -> pd.DataFrame:
    """Table 6: every matched D/F pair, in execution order, with its complete-wall F/D."""
    from residency.analysis.stats import paired_log_ratio

    pairs = matched_pairs(pd.read_parquet(runs_parquet))
    d, f = pairs[arms.DIRECT], pairs[arms.ASYNC]
    out = pd.DataFrame({"Block": d["block"].astype(int),
                        "Order": d["order"].str.replace("-", "->", regex=False),
                        "D (s)": d["wall_s"].round(3), "F (s)": f["wall_s"].round(3),
                        "F/D": (f["wall_s"] / d["wall_s"]).round(6)})
    caption = "Matched complete-wall D/F pairs and their execution order"
    if len(out) >= 2:
        r = paired_log_ratio(d["wall_s"], f["wall_s"])
        caption += (f"; geometric F/D {r.ratio:.6f}, 95% paired-log t interval [{r.low:.6f}, {r.high:.6f}],"
                    f" reciprocal {r.reciprocal:.3f}")
    write_table(out, stem, caption)
    return out


# ---- the model sweep ----------------------------------------------------------------------


def _per_r_ratio(main: pd.DataFrame, num: str, den: str, column: str) -> dict[float, float]:
    """mean(column) of arm `num` / mean(column) of arm `den`, per r (valid runs)."""
    ok = main[main["valid"]]
    means = ok.groupby(["arm", "r"])[column].mean()
    return {float(r): means.get((num, r), float("nan")) / means.get((den, r), float("nan"))
            for r in sorted(ok["r"].dropna().unique())}


def _verdicts(claim_paths: list[str]) -> dict[str, str]:
    import json

    docs = [json.loads(Path(p).read_text()) for p in claim_paths]
    return {d["id"]: d["verdict"] for d in sorted(docs, key=lambda d: (d["id"][0] != "P", int(d["id"][1:])))}


def model_row(name: str, runs_parquet, opt_parquet, inventory_path, claim_paths: list[str]) -> dict:
    """One model of the sweep: its architecture and quant types (the inventory), T_repr,
    exactness, D/OPT and D's bytes against A and C per r, tokens/s per arm, claim verdicts."""
    import json

    inv = json.loads(Path(inventory_path).read_text())
    runs, opt = pd.read_parquet(runs_parquet), pd.read_parquet(opt_parquet)
    main = runs[runs["campaign"] == "main"]
    row = {"model": name, "architecture": inv.get("architecture"),
           "quant_types": " ".join(sorted({t["type"] for t in inv["tensors"]})), "t_repr_bytes": int(inv["tensor_bytes"]),
           "exact": f"{int(runs['exact'].fillna(False).sum())}/{len(runs)}"}
    d = opt[(opt["campaign"] == "main") & (opt["arm"] == arms.PAGER_DECLARED)]
    for r, v in d.groupby("r")["d_over_opt"].mean().items():
        row[f"D/OPT r={float(r):g}"] = v
    for other in (arms.KERNEL_MMAP, arms.PAGER_LRU):
        for r, v in _per_r_ratio(main, arms.PAGER_DECLARED, other, "physical_bytes_read").items():
            row[f"D/{arms.letter(other)} bytes r={r:g}"] = v
    tps = main[main["valid"]].groupby("arm")["tokens_per_s"].mean()
    for arm in (a for a in arms.PAGER_ARMS if a in tps):
        row[f"{arms.letter(arm)} tok/s"] = tps[arm]
    return row | _verdicts(claim_paths)


def models_summary(models: list[dict], stem) -> pd.DataFrame:
    """results/tables/models.*: one row per model of pager_model.models (the primary first);
    `models`: [{name, runs, opt, inventory, claims: [record paths]}]."""
    rows = [model_row(m["name"], m["runs"], m["opt"], m["inventory"], m["claims"]) for m in models]
    df = pd.DataFrame(rows)
    write_table(df, stem, "The model sweep: per model, exactness, D/OPT and D's bytes against A and C per budget "
                          "ratio r, tokens/s per arm (means over valid main runs), the model claims' verdicts")
    return df
