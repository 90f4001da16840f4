"""The I/O roofline of the real-model study, measured in the same campaign.

Two rates bound the decode throughput of any arm at a budget ratio r:

  - the compute rate: the unconstrained plain-mmap baseline's decode tokens/s (median of its
    valid runs): no policy decodes faster than the model with every weight resident;
  - the storage bandwidth over the bytes each token must read: this machine's O_DIRECT read
    rate of the model file at the campaign's chunk size and the source's depth (the
    roofline calibration runs, `residctl stream`, median of the reps), over OPT's bytes per
    token at r (Belady's fetches at the pager's capacity, the fewest any policy can read).

    roofline(r) = min(compute rate, bandwidth / OPT bytes per token at r)

Each arm's fraction of the roofline is its median decode tokens/s over the bound at its r.
OPT's bytes are the whole trace's (the prefill traversal included) over the generated tokens,
as the study's physical_bytes_per_token is.
"""

from __future__ import annotations

import pandas as pd

from residency.core import arms


class RooflineError(ValueError):
    pass


def bandwidth(calib: pd.DataFrame) -> float:
    """Median bandwidth (bytes/s) of the calibration reps that completed."""
    ok = calib[(calib["status"] == "ok") & calib["bandwidth_bytes_per_s"].notna()]
    if ok.empty:
        raise RooflineError("roofline: no completed calibration run (results/pager_model_roofline.parquet)")
    return float(ok["bandwidth_bytes_per_s"].median())


def compute_rate(runs: pd.DataFrame) -> float:
    """Median decode tokens/s of the valid unconstrained baseline runs."""
    base = runs[(runs["campaign"] == "baseline") & runs["valid"].fillna(False).astype(bool)]["tokens_per_s"].dropna()
    if base.empty:
        raise RooflineError("roofline: no valid unconstrained baseline run to take the compute rate from")
    return float(base.median())


def opt_bytes_per_token(runs: pd.DataFrame, opt: pd.DataFrame) -> pd.Series:
    """OPT's physical bytes per generated token per r: Belady's misses at the pager's
    capacity, from D's own traces (as figure 06 draws it), times the chunk size; median of reps."""
    o = opt[(opt["campaign"] == "main") & (opt["arm"] == arms.PAGER_DECLARED) & opt["opt_misses"].notna()
            & opt["valid"].fillna(False).astype(bool)]
    o = o[["run_dir", "r", "opt_misses"]].merge(runs[["run_dir", "chunk_bytes", "tokens"]], on="run_dir")
    o = o[o["tokens"] > 0]
    return (o["opt_misses"] * o["chunk_bytes"] / o["tokens"]).groupby(o["r"]).median().rename("opt_bytes_per_token")


def bound(runs: pd.DataFrame, opt: pd.DataFrame, calib: pd.DataFrame) -> pd.DataFrame:
    """The roofline per r: columns r, bandwidth_bytes_per_s, compute_tokens_per_s,
    opt_bytes_per_token, io_tokens_per_s, roofline_tokens_per_s, bound_by (compute | io)."""
    bw, cr = bandwidth(calib), compute_rate(runs)
    bpt = opt_bytes_per_token(runs, opt)
    df = bpt.reset_index()
    df["bandwidth_bytes_per_s"] = bw
    df["compute_tokens_per_s"] = cr
    df["io_tokens_per_s"] = bw / df["opt_bytes_per_token"]
    df["roofline_tokens_per_s"] = df[["compute_tokens_per_s", "io_tokens_per_s"]].min(axis=1)
    df["bound_by"] = ["compute" if c <= i else "io" for c, i in zip(df["compute_tokens_per_s"], df["io_tokens_per_s"])]
    return df[["r", "bandwidth_bytes_per_s", "compute_tokens_per_s", "opt_bytes_per_token", "io_tokens_per_s",
               "roofline_tokens_per_s", "bound_by"]].sort_values("r").reset_index(drop=True)


def fractions(runs: pd.DataFrame, roof: pd.DataFrame) -> pd.DataFrame:
    """Each arm's median decode tokens/s (valid main runs) over the roofline at its r:
    columns arm, r, tokens_per_s, roofline_tokens_per_s, fraction_of_roofline."""
    main = runs[(runs["campaign"] == "main") & runs["valid"].fillna(False).astype(bool)]
    g = main.groupby(["arm", "r"])["tokens_per_s"].median().reset_index()
    g = g.merge(roof[["r", "roofline_tokens_per_s"]], on="r", how="left")
    g["fraction_of_roofline"] = g["tokens_per_s"] / g["roofline_tokens_per_s"]
    return g


def from_parquet(runs_parquet, opt_parquet, roofline_parquet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(bound per r, fractions per arm and r) from the study's three tables."""
    runs, opt = pd.read_parquet(runs_parquet), pd.read_parquet(opt_parquet)
    roof = bound(runs, opt, pd.read_parquet(roofline_parquet))
    return roof, fractions(runs, roof)
