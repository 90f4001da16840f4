"""The import graph kept between processes (residency.core.imports.graph): the graph a later
process reads from the cache is the one the sources give, and any change to the sources
(an import added, a module added) or a damaged cache file reads the sources again."""

import json
import shutil

import pytest

from residency.core import imports


def _clear():
    for f in (imports.modules, imports._tree, imports.graph):
        f.cache_clear()


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A copy of the package that imports.py reads instead of the checkout's."""
    copy = tmp_path / "residency"
    shutil.copytree(imports.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    monkeypatch.setattr(imports, "PACKAGE_DIR", copy)
    monkeypatch.setattr(imports, "GRAPH_CACHE", copy / "__pycache__" / "import-graph.json")
    _clear()
    yield copy
    _clear()


def _fresh_read() -> dict:
    return {m: {r: imports._edges_read(m, r) for r in (True, False)} for m in imports.modules()}


def test_a_later_process_reads_the_graph_the_sources_give(package):
    made = imports.graph()
    assert imports.GRAPH_CACHE.exists()
    _clear()  # as a new process would start
    kept = json.loads(imports.GRAPH_CACHE.read_text())
    assert kept["digest"] == imports.source_digest()
    assert imports.graph() == made == _fresh_read()
    assert "residency.evidence.extents" in imports.edges("residency.evidence.demand")


def test_an_added_import_reads_the_sources_again(package):
    imports.graph()
    target = package / "evidence" / "extents.py"
    target.write_text(target.read_text() + "\nfrom residency.render import tables  # noqa\n")
    _clear()
    assert "residency.render.tables" in imports.edges("residency.evidence.extents")
    _clear()
    assert imports.graph() == _fresh_read()  # and the cache now holds the changed graph


def test_an_added_module_reads_the_sources_again(package):
    imports.graph()
    (package / "core" / "newcomer.py").write_text("from residency.core import arms  # noqa\n")
    _clear()
    assert imports.edges("residency.core.newcomer") == {"residency.core.arms"}


@pytest.mark.parametrize("damage", ["", "{not json", '{"digest": 7}', '{"digest": "DIGEST", "edges": []}'])
def test_a_damaged_cache_is_read_again(package, damage):
    imports.GRAPH_CACHE.parent.mkdir(exist_ok=True)
    imports.GRAPH_CACHE.write_text(damage.replace("DIGEST", imports.source_digest()))
    _clear()
    assert imports.graph() == _fresh_read()


def test_a_cache_that_cannot_be_written_is_only_not_kept(package):
    imports.GRAPH_CACHE.parent.mkdir(exist_ok=True)
    imports.GRAPH_CACHE.mkdir()  # a directory where the file would go: writing it fails
    assert imports.graph() == _fresh_read()
    assert not list(imports.GRAPH_CACHE.parent.glob("*.tmp"))
