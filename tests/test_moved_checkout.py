"""A moved or copied checkout builds: workflow/scripts/cmake-configure.sh (the engine rule's
and the Makefile's configure step) clears a build directory's cache that was configured for
another path, which plain CMake refuses, and leaves a cache of this path alone."""

import shutil
import subprocess

import pytest

from conftest import ROOT

CONFIGURE = ROOT / "workflow" / "scripts" / "cmake-configure.sh"
pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")


def checkout(where):
    (where / "engine").mkdir(parents=True)
    (where / "engine" / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.20)\nproject(moved NONE)\n")
    return where


def configure(where, *prog):
    args = ["-S", "engine", "-B", ".build/engine"] if prog == ("cmake",) else ["engine", ".build/engine"]
    return subprocess.run([*prog, *args], cwd=where, capture_output=True, text=True)


def test_a_copied_checkout_is_configured_afresh_where_plain_cmake_refuses(tmp_path):
    old = checkout(tmp_path / "old")
    assert configure(old, str(CONFIGURE)).returncode == 0
    new = tmp_path / "new"
    shutil.copytree(old, new, symlinks=True)  # as `cp -a` of the checkout
    plain = configure(new, "cmake")  # the negative control: CMake itself refuses the copy
    assert plain.returncode != 0 and "is different than the directory" in plain.stderr, plain.stderr
    p = configure(new, str(CONFIGURE))
    assert p.returncode == 0, p.stderr
    notes = [ln for ln in p.stderr.splitlines() if ln.startswith("cmake-configure:")]
    assert notes == [f"cmake-configure: .build/engine was configured for {old}/engine (in {old}/.build/engine); "
                     f"configuring it afresh for {new}/engine"], p.stderr
    assert f"CMAKE_HOME_DIRECTORY:INTERNAL={new}/engine" in (new / ".build/engine/CMakeCache.txt").read_text()


def test_a_cache_of_this_path_is_kept(tmp_path):
    here = checkout(tmp_path / "here")
    assert configure(here, str(CONFIGURE)).returncode == 0
    stamp = (here / ".build/engine/CMakeCache.txt").stat().st_ino
    p = configure(here, str(CONFIGURE))
    assert p.returncode == 0 and "cmake-configure:" not in p.stderr, p.stderr
    assert (here / ".build/engine/CMakeCache.txt").stat().st_ino == stamp


def test_a_cache_of_another_generator_is_configured_afresh(tmp_path):
    """A build directory from before the builds used Ninja: plain CMake refuses the generator change."""
    here = checkout(tmp_path / "here")
    made = subprocess.run(["cmake", "-G", "Unix Makefiles", "-S", "engine", "-B", ".build/engine"], cwd=here,
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    plain = subprocess.run(["cmake", "-G", "Ninja", "-S", "engine", "-B", ".build/engine"], cwd=here,
                           capture_output=True, text=True)
    assert plain.returncode != 0 and "Does not match the generator used previously" in plain.stderr, plain.stderr
    p = configure(here, str(CONFIGURE))
    assert p.returncode == 0, p.stderr
    assert [ln for ln in p.stderr.splitlines() if ln.startswith("cmake-configure:")] == [
        "cmake-configure: .build/engine was configured for Unix Makefiles; configuring it afresh for Ninja"], p.stderr
    assert "CMAKE_GENERATOR:INTERNAL=Ninja" in (here / ".build/engine/CMakeCache.txt").read_text()
