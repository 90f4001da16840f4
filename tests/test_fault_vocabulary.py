"""The fault cells are written once, in the engine's table (engine/src/source/fault_cells.json):
Python reads it (core/fault_vocabulary.py), the config schema's cells come from it, and the
built engine prints the same table (`residctl faults`)."""

import json
import subprocess

import pytest

from residency.core import config, fault_vocabulary as fv
from conftest import ROOT

RESIDCTL = ROOT / ".build" / "engine-test" / "residctl"
TABLE_7 = ("none", "short-read", "eio", "bundle-extent-failure", "stale-completion", "wrong-object", "out-of-order",
           "held-consumer", "reset-outstanding", "shutdown-live-consumer")


def test_the_campaign_reads_table_7_from_the_engines_table():
    assert fv.CELLS == TABLE_7  # reference 004 Table 7, in its order
    assert fv.CONTROL == "none"
    assert fv.FATAL == {"short-read", "eio", "bundle-extent-failure", "stale-completion", "wrong-object"}
    assert fv.NEEDS_DEPTH == {"out-of-order", "reset-outstanding"}
    engine_only = [c["cell"] for c in fv.load() if not c["table_7"]]
    assert engine_only == ["stall", "recycle-live"] and not set(engine_only) & set(fv.CELLS)


def test_every_cell_is_well_formed():
    cells = fv.load()
    assert len({c["cell"] for c in cells}) == len(cells)
    for c in cells:
        assert set(c) == {"cell", "class", "table_7", "carried_by", "needs_depth"}, c
        assert c["class"] in ("fatal", "recoverable", "control") and c["carried_by"] in ("source", "driver", "none")
        assert c["class"] != "fatal" or c["carried_by"] == "source", c  # the decorator fails a read closed


def test_the_config_schema_names_the_same_cells():
    assert config.load_schema()["$defs"]["fault_cell"]["enum"] == list(fv.CELLS)


@pytest.mark.skipif(not RESIDCTL.exists(), reason=f"[engine] {RESIDCTL} not built (see README: Tests)")
def test_residctl_prints_the_table_it_was_built_from():
    p = subprocess.run([str(RESIDCTL), "faults"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == json.loads(fv.TABLE_PATH.read_text())
