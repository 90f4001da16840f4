"""Figures: one function per figure, each drawn only from Parquet.

Files are written atomically, PNG and PDF side by side, without timestamps in their
metadata so the same Parquet gives the same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from residency.core import arms, atomic  # noqa: E402
from residency.analysis.pairs import matched_pairs  # noqa: E402

ARM_STYLE = {  # label ({letter}: the arm's reference letter), colour, marker
    arms.KERNEL_MMAP: ("{letter} kernel mmap", "#7f7f7f", "s"),
    arms.PAGER_LRU: ("{letter} pager, LRU", "#d62728", "v"),
    arms.PAGER_DECLARED: ("{letter} (declared) pager", "#1f77b4", "o"),
    arms.PAGER_PREFETCH: ("{letter} declared + prefetch", "#2ca02c", "^"),
    arms.PAGER_ZERO: ("pager, no reuse", "#9467bd", "x"),
}


def _arm_styles():
    """(arm, label, colour, marker) of every pager-study arm, in legend order."""
    return [(arm, arms.labelled(arm, label), color, marker) for arm, (label, color, marker) in ARM_STYLE.items()]


def _save(fig, stem: str | os.PathLike) -> None:
    stem = Path(stem)
    for ext, meta in ((".png", {"Software": None}), (".pdf", {"CreationDate": None, "Producer": None})):
        with atomic.atomic_path(stem.with_suffix(ext), suffix=ext) as tmp:
            fig.savefig(tmp, format=ext[1:], dpi=150, metadata=meta, bbox_inches="tight")
    plt.close(fig)


def _band(ax, df: pd.DataFrame, y: str, label: str, color: str, marker: str) -> None:
    g = df.groupby("r")[y].agg(["mean", "min", "max"]).reset_index().sort_values("r")
    ax.plot(g["r"], g["mean"], marker=marker, color=color, label=label, linewidth=1.5)
    ax.fill_between(g["r"], g["min"], g["max"], color=color, alpha=0.15, linewidth=0)


def fig02_miss_rate_vs_optimal(runs_parquet, opt_parquet, stem) -> None:
    """Figure 02: miss rate against the budget ratio r for arms A, C, D, E and Belady's OPT."""
    runs = pd.read_parquet(runs_parquet)
    opt = pd.read_parquet(opt_parquet)
    main = runs[(runs["campaign"] == "main") & (runs["status"] == "ok")].copy()
    main["bytes_per_pass"] = main["physical_bytes_read"] / (main["passes"] * main["region_bytes"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    for arm, label, color, marker in _arm_styles():
        sub = main[main["arm"] == arm]
        if sub.empty:
            continue
        _band(ax1, sub, "miss_rate", label, color, marker)
        _band(ax2, sub, "bytes_per_pass", label, color, marker)
    # OPT at the pager's capacity (the bound D is held to), from the D runs' own traces;
    # in bytes, OPT's fetches are also a floor for prefetching arms.
    o = opt[(opt["campaign"] == "main") & (opt["arm"] == arms.PAGER_DECLARED) & opt["opt_miss_rate"].notna()]
    o = o.merge(main[["run_dir", "chunk_bytes", "passes", "region_bytes"]], on="run_dir")
    if not o.empty:
        o["opt_bytes_per_pass"] = o["opt_misses"] * o["chunk_bytes"] / (o["passes"] * o["region_bytes"])
        g = o.groupby("r")[["opt_miss_rate", "opt_bytes_per_pass"]].mean().reset_index()
        for ax, col in ((ax1, "opt_miss_rate"), (ax2, "opt_bytes_per_pass")):
            ax.plot(g["r"], g[col], color="black", linestyle="--", marker="*", label=f"{arms.OPT} (Belady)")
    n_chunks = int(main["chunks"].iloc[0]) if not main.empty else 0
    passes = int(main["passes"].iloc[0]) if not main.empty else 0
    ax1.set(title="(a) demand misses", xlabel="budget ratio r = resident weight budget / region size",
            ylabel="demand miss rate (accesses finding the chunk absent)", ylim=(0, 1.05))
    ax2.set(title="(b) traffic, prefetch and readahead included", xlabel="budget ratio r",
            ylabel="physical bytes read per pass / region size")
    ax2.set_ylim(bottom=0)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.title.set_fontsize(9)
    ax1.legend(fontsize=8, loc="lower left")
    fig.suptitle(f"Figure 02. Miss rate against the Belady optimum on a cyclic scan\n({n_chunks} chunks, "
                 f"{passes} passes, equal host limit r*T+O per arm; mean of reps, band = min-max)", fontsize=10)
    _save(fig, stem)


def _model_frames(runs_parquet, opt_parquet):
    runs = pd.read_parquet(runs_parquet)
    opt = pd.read_parquet(opt_parquet)
    main = runs[(runs["campaign"] == "main") & runs["valid"]].copy()
    base = runs[(runs["campaign"] == "baseline") & runs["valid"]]
    return runs, opt, main, base


def _model_title(runs: pd.DataFrame) -> str:
    m = runs.dropna(subset=["model"])
    if m.empty:
        return "no runs"
    row = m.iloc[0]
    return (f"{row['model']} ({row['t_repr_bytes'] / 1e6:.1f} MB of tensors), {int(row['tokens'])} generated "
            f"tokens, equal host limit r*T+O per arm; mean of valid reps, band = min-max")


def _roofline(runs_parquet, opt_parquet, roofline_parquet):
    """The roofline per r (roofline.bound), or None without a calibration table."""
    if roofline_parquet is None:
        return None
    from residency.analysis import roofline

    return roofline.from_parquet(runs_parquet, opt_parquet, roofline_parquet)[0]


def fig06_real_model_bytes(runs_parquet, opt_parquet, stem, roofline=None) -> None:
    """Figure 06: physical bytes read per run (prefill + generated tokens) against r, per arm, with OPT.
    With the roofline calibration: the bytes the measured bandwidth reads in the time the
    unconstrained model computes the run's tokens (a run reading more is I/O-bound)."""
    runs, opt, main, _ = _model_frames(runs_parquet, opt_parquet)
    roof = _roofline(runs_parquet, opt_parquet, roofline)
    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    for arm, label, color, marker in _arm_styles():
        sub = main[main["arm"] == arm].assign(gb=lambda d: d["physical_bytes_read"] / 1e9)
        if not sub.empty:
            _band(ax, sub, "gb", label, color, marker)
    o = opt[(opt["arm"] == arms.PAGER_DECLARED) & opt["opt_misses"].notna() & opt["valid"]]
    o = o.merge(main[["run_dir", "chunk_bytes"]], on="run_dir")
    if not o.empty:
        g = (o["opt_misses"] * o["chunk_bytes"] / 1e9).groupby(o["r"]).mean()
        ax.plot(g.index, g.values, color="black", linestyle="--", marker="*", label=f"{arms.OPT} (Belady, D's capacity)")
    if not main.empty:
        t = main["t_repr_bytes"].iloc[0] * main["tokens"].iloc[0] / 1e9
        ax.axhline(t, color="#999999", linestyle=":", linewidth=1)
        ax.annotate("whole model per token", (main["r"].min(), t), textcoords="offset points",
                    xytext=(0, 4), fontsize=8, color="#666666")
    if roof is not None and not roof.empty and not main.empty:
        bw, cr = roof["bandwidth_bytes_per_s"].iloc[0], roof["compute_tokens_per_s"].iloc[0]
        even = bw * main["tokens"].iloc[0] / cr / 1e9
        ax.axhline(even, color="#8c564b", linestyle="-.", linewidth=1.2,
                   label=f"roofline ridge: what {bw / 1e9:.2f} GB/s reads while the model computes ({cr:.1f} tok/s);"
                         " above it a run is I/O-bound")
    ax.set(xlabel="budget ratio r = resident weight budget / T_repr",
           ylabel="physical bytes read per run (GB)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Figure 06. Bytes read from storage on a real model\n" + _model_title(runs), fontsize=9)
    _save(fig, stem)


def fig07_throughput_scaling(runs_parquet, opt_parquet, stem, roofline=None) -> None:
    """Figure 07: decode tokens/s against r, per arm, with the unconstrained baseline as a line
    and, with the roofline calibration, the bound min(compute rate, bandwidth / OPT bytes per token)."""
    runs, _, main, base = _model_frames(runs_parquet, opt_parquet)
    roof = _roofline(runs_parquet, opt_parquet, roofline)
    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    for arm, label, color, marker in _arm_styles():
        sub = main[main["arm"] == arm]
        if not sub.empty:
            _band(ax, sub, "tokens_per_s", label, color, marker)
    if not base.empty:
        m = base["tokens_per_s"].mean()
        ax.axhline(m, color="black", linestyle="--", linewidth=1.2,
                   label=f"unconstrained mmap baseline ({m:.1f} tok/s)")
        ax.axhspan(base["tokens_per_s"].min(), base["tokens_per_s"].max(), color="black", alpha=0.08, linewidth=0)
    if roof is not None and not roof.empty:
        bw = roof["bandwidth_bytes_per_s"].iloc[0]
        ax.plot(roof["r"], roof["roofline_tokens_per_s"], color="#8c564b", linestyle="-.", marker="*",
                label=f"roofline: min(compute, {bw / 1e9:.2f} GB/s / {arms.OPT} bytes per token)")
    ax.set(xlabel="budget ratio r = resident weight budget / T_repr", ylabel="decode throughput (tokens/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Figure 07. Throughput against the budget on a real model\n" + _model_title(runs), fontsize=9)
    _save(fig, stem)


def fig08_matched_source_pairs(runs_parquet, _unused, stem) -> None:
    """Figure 08: complete wall of each matched D/F pair (execution order) and F/D with its
    95% paired-log interval; the P cell for reference."""
    from residency.analysis.stats import paired_log_ratio

    df = pd.read_parquet(runs_parquet)
    p = df[df["source_arm"] == arms.BUFFERED]
    pairs = matched_pairs(df)
    d, f = pairs[arms.DIRECT], pairs[arms.ASYNC]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    x = range(len(pairs))
    w = 0.38
    ax1.bar([i - w / 2 for i in x], d["wall_s"], w, color="#1f77b4", label="D (direct): blocking O_DIRECT, 1 window")
    ax1.bar([i + w / 2 for i in x], f["wall_s"], w, color="#ff7f0e", label="F: io_uring O_DIRECT, 8 windows")
    if not p.empty:
        ax1.axhline(p["wall_s"].iloc[0], color="#7f7f7f", linestyle=":", label="P: buffered pread")
    ax1.set_xticks(list(x), [f"{b}\n{o.replace('-', '->')}" for b, o in zip(d["block"], d["order"])])
    ax1.set(xlabel="block (execution order)", ylabel="complete wall (s)", title="(a) complete wall per cell")
    ax1.legend(fontsize=8, loc="lower right")
    ratio = f["wall_s"] / d["wall_s"]
    ax2.plot(list(x), ratio, "o", color="black", label="F/D per pair")
    if len(pairs) >= 2:
        r = paired_log_ratio(d["wall_s"], f["wall_s"])
        ax2.axhline(r.ratio, color="#ff7f0e", label=f"geometric F/D {r.ratio:.3f}")
        ax2.axhspan(r.low, r.high, color="#ff7f0e", alpha=0.2, label=f"95% paired-log t [{r.low:.3f}, {r.high:.3f}]")
    ax2.axhline(1.0, color="#999999", linestyle="--", linewidth=1)
    ax2.set_xticks(list(x), [str(b) for b in d["block"]])
    ax2.set(xlabel="block", ylabel="F/D complete wall", title="(b) paired ratio")
    ax2.set_ylim(bottom=0)
    ax2.legend(fontsize=8)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, axis="y")
        ax.title.set_fontsize(9)
    model = df["model"].dropna().iloc[0] if df["model"].notna().any() else "?"
    fig.suptitle(f"Figure 08. Matched source pairs on {model}: same model, prompt, cache policy, "
                 "cache size and host limit; only the source changes", fontsize=10)
    _save(fig, stem)


RECLAIM_ARMS = (("unprotected", "#d62728"), ("protected", "#1f77b4"))


def _reclaim_bars(ax, df: pd.DataFrame, metrics: list[tuple[str, str]], scale: float, ylabel: str) -> None:
    """Grouped bars per metric, one per arm: the mean over the arm's cells, whiskers min..max;
    a metric this cgroup version lacks (all null) is marked n/a, never drawn as zero."""
    from matplotlib.patches import Patch

    w, handles = 0.38, []
    for k, (arm, color) in enumerate(RECLAIM_ARMS):
        cells = df[df["protection"] == arm]
        done = int((cells["status"] == "ok").sum())
        handles.append(Patch(color=color, label=f"{arm}: {done} of {len(cells)} cells completed"))
        for i, (col, _) in enumerate(metrics):
            v = cells[col].dropna().astype(float) / scale
            x = i + (k - 0.5) * w
            if v.empty:  # the counter does not exist here, or the cell never wrote it
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, color=color)
                continue
            ax.bar(x, v.mean(), w, color=color, yerr=[[v.mean() - v.min()], [v.max() - v.mean()]], capsize=2)
            ax.text(x, v.mean(), f"{v.mean():.3g}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(metrics)), [label for _, label in metrics], fontsize=8)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(0, max(ax.get_ylim()[1], 1) * 10)  # room for the value labels and the legend
    ax.set_ylabel(ylabel + " (symlog)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(handles=handles, fontsize=8, loc="upper left")


def fig04_reclaim_authority(runs_parquet, _unused, stem) -> None:
    """Figure 04: what the kernel took from the pager's cgroup under pressure, with and
    without the pager's protection (reference 000, claim 3)."""
    df = pd.read_parquet(runs_parquet)
    df = df[df["status"] != "unavailable"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    if df.empty:
        for ax in (ax1, ax2):
            ax.text(0.5, 0.5, "no reclaim cell could be made on this machine\n(see claims/P3.json)",
                    ha="center", va="center", transform=ax.transAxes)
    else:
        _reclaim_bars(ax1, df, [("swap_peak_bytes", "kernel put to swap\n(peak)"),
                                ("kernel_reclaimed_bytes", "kernel reclaimed\n(v2 pgsteal)"),
                                ("pager_evicted_bytes", "pager's own\nevictions")], 2**20, "MiB")
        _reclaim_bars(ax2, df, [("high_events", "memory.events\nhigh (v2)"), ("pgscan", "pgscan\n(v2)"),
                                ("failcnt", "failcnt\n(v1)"), ("pressure_events", "vmpressure\n(v1)"),
                                ("workingset_refault_anon", "anon refaults\n(pages)")], 1, "count")
    ax1.set_title("(a) bytes taken and freed", fontsize=9)
    ax2.set_title("(b) the kernel's reclaim counters", fontsize=9)
    versions = sorted(df["cgroup_version"].dropna().astype(int).unique()) if not df.empty else []
    pressure = df["pressure_bytes"].dropna()
    fig.suptitle("Figure 04. Reclaim authority: the pager's cgroup under pressure"
                 + (f" ({pressure.iloc[0] / 2**20:.0f} MiB" if not pressure.empty else " (")
                 + f", cgroup v{'/'.join(map(str, versions)) or '?'}, swap available), "
                 "without and with --protect", fontsize=10)
    _save(fig, stem)
