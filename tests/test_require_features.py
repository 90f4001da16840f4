"""RESIDENCY_REQUIRE turns a skip for a named feature into a failure (tests/require_features.py)."""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
BODY = '''
import pytest

def test_needs_a_cgroup():
    pytest.skip("[cgroup] no writable memory cgroup here")

@pytest.mark.skipif(True, reason="[swap] no swap file can be made here")
def test_needs_swap():
    pass

def test_untagged():
    pytest.skip("not a feature")
'''


def run(tmp_path, require: str | None):
    (tmp_path / "test_body.py").write_text(BODY)
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("RESIDENCY_REQUIRE", None)
    if require is not None:
        env["RESIDENCY_REQUIRE"] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "require_features", "-p", "no:cacheprovider",
                           "-rfs", str(tmp_path / "test_body.py"), "--rootdir", str(tmp_path), "-c", os.devnull],
                          capture_output=True, text=True, cwd=tmp_path, env=env)


def test_without_the_setting_a_missing_feature_skips(tmp_path):
    p = run(tmp_path, None)
    assert p.returncode == 0 and "3 skipped" in p.stdout, p.stdout


def test_a_required_feature_that_is_missing_fails_naming_it(tmp_path):
    p = run(tmp_path, "cgroup,swap")
    assert p.returncode == 1, p.stdout
    assert "1 skipped" in p.stdout and "passed" not in p.stdout, p.stdout  # a skipif at setup reports an error
    assert "RESIDENCY_REQUIRE names cgroup" in p.stdout and "RESIDENCY_REQUIRE names swap" in p.stdout


def test_only_the_named_features_fail(tmp_path):
    p = run(tmp_path, "swap")
    assert p.returncode == 1 and "2 skipped" in p.stdout and "RESIDENCY_REQUIRE names swap" in p.stdout, p.stdout
    assert "RESIDENCY_REQUIRE names cgroup" not in p.stdout


def test_an_unknown_feature_is_a_usage_error(tmp_path):
    p = run(tmp_path, "cgroup,warp-drive")
    assert p.returncode == 4 and "unknown feature(s) warp-drive" in p.stdout + p.stderr
