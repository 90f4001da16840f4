"""The split the cluster test prints (tests/cluster_timing.py), on jobs whose times are known."""

import pandas as pd

from cluster_timing import node_time


def at(s: float) -> pd.Timestamp:
    return pd.Timestamp("2026-12-07") + pd.Timedelta(seconds=s)


def jobs(*spans) -> pd.DataFrame:
    return pd.DataFrame([{"submit": at(a), "start": at(b), "end": at(c)} for a, b, c in spans])


def test_busy_turnover_and_idle():
    # 0-10 runs; a job queued at 1 starts at 12 (2 s of turnover); one submitted only at 25
    # starts at 26 (8 s with nothing queued); one beside it at 27-29 adds no busy time.
    t = node_time(jobs((0, 0, 10), (1, 12, 18), (25, 26, 30), (26, 27, 29)))
    assert t == {"jobs": 4, "busy": 20.0, "turnover": 2.0, "idle": 8.0, "median_job": 5.0}


def test_overlapping_jobs_count_once():
    t = node_time(jobs((0, 0, 10), (0, 5, 15)))
    assert (t["busy"], t["turnover"], t["idle"]) == (15.0, 0.0, 0.0)
