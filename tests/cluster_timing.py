"""Where a SLURM run's node time went, from its jobs' sacct times (tests/test_cluster.py)."""

import pandas as pd


def node_time(jobs: pd.DataFrame) -> dict:
    """Where the node's time went, from the jobs' sacct times (one node, one job at a time
    for run cells): `busy` the seconds some job ran; between one job's end and the next one's
    start, `turnover` when that job was already queued (SLURM's own start latency) and
    `idle` when it was not (waiting for Snakemake to see a finish and submit what follows)."""
    out = {"jobs": len(jobs), "busy": 0.0, "turnover": 0.0, "idle": 0.0,
           "median_job": float((jobs["end"] - jobs["start"]).dt.total_seconds().median())}
    end = None
    for _, j in jobs.sort_values("start").iterrows():
        if end is not None and j["start"] > end:
            gap = (j["start"] - end).total_seconds()
            out["turnover" if j["submit"] <= end else "idle"] += gap
        run_from = j["start"] if end is None else max(j["start"], end)
        out["busy"] += max(0.0, (j["end"] - run_from).total_seconds())
        end = j["end"] if end is None else max(end, j["end"])
    return out
