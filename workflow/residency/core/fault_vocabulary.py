"""The fault campaign's cell vocabulary (reference 004 §5.4, Table 7), read from the engine's
one table, `engine/src/source/fault_cells.json` (the engine's enum and `residctl faults`
come from the same file, so the config check needs no built engine): Table 7's cells in
its order, the control, the cells that must fail closed, and those that need reads in
flight together. The config check (core.config) and the campaign (campaigns.fault_cells)
read these."""

from __future__ import annotations

import json
from pathlib import Path

TABLE_PATH = Path(__file__).resolve().parents[3] / "engine" / "src" / "source" / "fault_cells.json"


def load(path: Path = TABLE_PATH) -> list[dict]:
    """The table's cells, in its order: {cell, class, table_7, carried_by, needs_depth}."""
    return json.loads(path.read_text())["cells"]


_TABLE_7 = [c for c in load() if c["table_7"]]
CELLS = tuple(c["cell"] for c in _TABLE_7)
CLASS = {c["cell"]: c["class"] for c in _TABLE_7}
(CONTROL,) = (c for c in CELLS if CLASS[c] == "control")  # the no-fault cell, `none`
FATAL = frozenset(c for c in CELLS if CLASS[c] == "fatal")
# Cells that need reads in flight together: an asynchronous source (uring) with windows >= 2.
NEEDS_DEPTH = frozenset(c["cell"] for c in _TABLE_7 if c["needs_depth"])
