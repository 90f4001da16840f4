"""The arm vocabulary is written once (residency.core.arms); the config schema, the run
records' letters and the matched campaign's source engines agree with it."""

from residency.core import arms, config
from residency.gather import pager as gather, base as gather_base


def test_reference_letters():
    assert [arms.letter(a) for a in arms.PAGER_ARMS] == ["A", "C", "D", "E", "Z"]
    assert arms.letter("belady") == "?" and arms.OPT == "OPT"  # a bound, never a run arm
    assert gather_base.ARM_LETTER is arms.PAGER_LETTER


def test_labels_carry_the_letter():
    assert arms.labelled(arms.PAGER_DECLARED, "{letter} (declared)") == "D (declared)"
    assert arms.labelled(arms.PAGER_ZERO, "no reuse") == "no reuse"


def test_config_schema_names_the_same_arms():
    schema = config.load_schema()
    assert schema["$defs"]["arm"]["enum"] == list(arms.PAGER_ARMS)
    policies = schema["properties"]["matched_source"]["properties"]["policy"]["enum"]
    assert set(policies) <= set(arms.PAGER_ARMS)


def test_source_arms():
    assert arms.SOURCE_ENGINE == {"P": "buffered", "D": "direct", "F": "uring"}
    assert arms.PAIRED == (arms.DIRECT, arms.ASYNC) and set(arms.PAIRED) <= set(arms.SOURCE_ARMS)
    assert arms.ORACLE not in arms.SOURCE_ARMS
