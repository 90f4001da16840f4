"""RESIDENCY_REQUIRE=feature,feature,...: a skip for a named feature becomes a failure.

A test that cannot run without a kernel feature, a privilege or a build skips with a reason
that starts with the feature's tag, `[cgroup] no writable memory cgroup here`. On a
machine known to have the feature (CI sets RESIDENCY_REQUIRE for what its machine has), a
missing feature must never turn a run green by skipping: this plugin reports such a skip
as a failure naming the feature. Unknown names are a usage error.
"""

from __future__ import annotations

import os
import re

import pytest

FEATURES = {
    "uffd": "userfaultfd (MISSING and MINOR)",
    "cgroup": "a writable memory cgroup with a hard limit (v1 or v2)",
    "uring": "io_uring",
    "root": "root (tmpfs mounts, swap files, the SLURM daemons)",
    "swap": "a swap file that can be turned on",
    "engine": "the engine's test build (residctl)",
    "llama": "the pinned llama.cpp build and its test models",
    "chromium": "a Chromium to open the report in",
    "pypi": "the PyPI registry",
}
TAG = re.compile(r"^\[([a-z]+)\] ")


def required() -> set[str]:
    names = {n.strip() for n in os.environ.get("RESIDENCY_REQUIRE", "").split(",") if n.strip()}
    unknown = names - set(FEATURES)
    if unknown:
        raise pytest.UsageError(f"RESIDENCY_REQUIRE: unknown feature(s) {', '.join(sorted(unknown))} "
                                f"(known: {', '.join(sorted(FEATURES))})")
    return names


def pytest_configure(config):
    config._residency_required = required()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return
    reason = report.longrepr[2].removeprefix("Skipped: ")
    tag = TAG.match(reason)
    if tag and tag.group(1) in item.config._residency_required:
        report.outcome = "failed"
        report.longrepr = f"RESIDENCY_REQUIRE names {tag.group(1)} ({FEATURES[tag.group(1)]}), but: {reason}"
