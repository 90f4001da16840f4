"""The matched pairs of the source campaign (reference 004 §5.3), paired once.

A pair is the D (direct) cell and the F cell of one block; table 6, figure 08 and claim
C2 all read the pairs from `matched_pairs`, so they cannot disagree on which cells pair.
"""

from __future__ import annotations

import pandas as pd

from .arms import PAIRED


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

