"""The matched pairs of the source campaign (reference 004 §5.3), paired once.

A pair is the D (direct) cell and the F cell of one block; table 6, figure 08 and claim
C2 all read the pairs from `matched_pairs`, so they cannot disagree on which cells pair.
"""

from __future__ import annotations

import pandas as pd

from residency.core.arms import PAIRED


def matched_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per block that has both a D and an F cell, in block order. Columns are
    (arm, column): pairs[DIRECT]["wall_s"] is the D cell's wall. A block run twice keeps
    its later cell (by position), as a rerun replaces the earlier one."""
    cells = runs[runs["source_arm"].isin(PAIRED)].sort_values("position", kind="stable")
    cells = cells.drop_duplicates(["block", "source_arm"], keep="last")
    by_arm = {arm: cells[cells["source_arm"] == arm].set_index("block", drop=False) for arm in PAIRED}
    return pd.concat(by_arm, axis=1, join="inner").sort_index().reset_index(drop=True)


def pair_records(pairs: pd.DataFrame) -> list[dict[str, dict]]:
    """The pairs as [{"D": record, "F": record}, ...] of plain Python values."""
    records = {arm: pairs[arm].to_dict("records") for arm in PAIRED}
    return [dict(zip(PAIRED, cells)) for cells in zip(*records.values())]


def overlap_bound(wall_s, exposed_source_wait_ns, threads):
    """The F/D a perfect overlap reaches from one D cell: D's exposed source wait io hidden
    under its compute c = wall - io, so F at best takes max(c, io) of D's c + io. The wait is
    summed over compute threads (each fault a blocked thread): io is its per-thread share,
    exact at one thread, at most the wall. None when the cell records no wall, wait or
    thread count (a table gathered before `threads` was a column)."""
    if wall_s is None or exposed_source_wait_ns is None or not threads or not wall_s > 0:
        return None
    io = min(exposed_source_wait_ns / 1e9 / int(threads), wall_s)
    return max(wall_s - io, io) / wall_s
