"""The Python half's layers (pyproject.toml [tool.importlinter], docs/architecture.md): the
package keeps its contract, and the check fails on a forbidden import (the negative control:
a copy of the package where core imports render)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(pythonpath: Path) -> subprocess.CompletedProcess:
    if not LINT.exists():
        pytest.fail(f"{LINT} is missing: import-linter is a pinned requirement (make venv)")
    return subprocess.run([str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          cwd=pythonpath, env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)


def test_the_package_keeps_its_layers():
    r = lint(ROOT / "workflow")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "residency layers KEPT" in r.stdout


def test_a_lower_layer_importing_a_higher_one_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "workflow" / "residency", tmp_path / "residency",
                    ignore=shutil.ignore_patterns("__pycache__"))
    atomic = tmp_path / "residency" / "core" / "atomic.py"
    atomic.write_text(atomic.read_text() + "\n\ndef _forbidden():\n    from residency.render import tables  # noqa\n")
    r = lint(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "residency layers BROKEN" in r.stdout
    assert "residency.core.atomic -> residency.render.tables" in r.stdout
