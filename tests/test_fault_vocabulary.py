"""The fault cells, written once in Python (core/fault_vocabulary.py), are cells the engine
knows by the same names (engine/src/source/fault.cpp, to_string of FaultCell)."""

import re
from pathlib import Path

from residency.core import fault_vocabulary as fv

FAULT_CPP = Path(__file__).resolve().parents[1] / "engine" / "src" / "source" / "fault.cpp"


def engine_names() -> set[str]:
    text = FAULT_CPP.read_text()
    body = text[text.index("const char* to_string(FaultCell f)"):]
    body = body[:body.index("\n}\n")]
    return set(re.findall(r'case FaultCell::\w+: return "([a-z-]+)";', body))


def test_every_campaign_cell_is_an_engine_cell():
    names = engine_names()
    assert "short-read" in names, "the engine's name table was not found"
    assert set(fv.CELLS) <= names, f"cells the engine does not know: {set(fv.CELLS) - names}"


def test_the_classes_partition_the_cells():
    assert fv.CONTROL in fv.CELLS and fv.FATAL <= set(fv.CELLS) and fv.NEEDS_DEPTH <= set(fv.CELLS)
    assert fv.CONTROL not in fv.FATAL and not fv.FATAL & fv.NEEDS_DEPTH
