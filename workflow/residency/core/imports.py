"""The residency package's own import graph, read from its source (never imported): which
source files a command's computation can execute, so Snakemake reruns an output when one of
them changes (the rules' `code` inputs, residency.cli.code_of) and nothing else.

An edge is any `import` or `from ... import` of a residency module anywhere in a module,
a function body's included: a lazy import runs on some path, so it counts. A package's
`__init__` is a module like any other. So is a string "residency.<module>:<attribute>": it
is how a lower layer's declaration (campaigns/studies.py) names a higher layer's function,
which the layer that calls it imports (`resolve`); the string is the import, made late.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import json
import os
import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # workflow/residency
PACKAGE = PACKAGE_DIR.name
GRAPH_CACHE = PACKAGE_DIR / "__pycache__" / "import-graph.json"  # beside Python's own caches (graph())
REFERENCE = re.compile(rf"^({PACKAGE}(?:\.\w+)*):(\w+)$")  # "residency.gather.pager:PAGER_MODEL_SCHEMA"


def module_of(ref: str) -> str:
    """The module a "module:attribute" reference names."""
    m = REFERENCE.match(ref)
    if m is None:
        raise ValueError(f"not a '{PACKAGE}.<module>:<attribute>' reference: {ref!r}")
    return m.group(1)


def resolve(ref: str):
    """The attribute a "module:attribute" reference names, its module imported now."""
    return getattr(importlib.import_module(module_of(ref)), ref.rsplit(":", 1)[1])


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> source file."""
    found = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported_by(nodes, module: str, is_package: bool, references: bool = True) -> set[str]:
    """The residency modules the import statements among `nodes` name, and (`references`)
    those the "module:attribute" strings among them name."""
    known, out = modules(), set()
    for node in nodes:
        if (references and isinstance(node, ast.Constant) and isinstance(node.value, str)
                and (ref := REFERENCE.match(node.value))):
            out.add(ref.group(1))
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = _base(node, module, is_package)
            if base is None or base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:  # `from pkg import mod` names a module, else an attribute of base
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return out & set(known)


def _base(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    if not node.level:
        return node.module
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


@functools.cache
def _tree(module: str) -> ast.Module:
    path = modules()[module]
    return ast.parse(path.read_text(), str(path))


def _edges_read(module: str, references: bool) -> frozenset[str]:
    nodes = ast.walk(_tree(module))
    return frozenset(imported_by(nodes, module, modules()[module].name == "__init__.py", references) - {module})


def source_digest() -> str:
    """sha256 over every module's name and bytes: what the import graph is a function of."""
    h = hashlib.sha256()
    for name, path in sorted(modules().items()):
        data = path.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@functools.cache
def graph() -> dict[str, dict[bool, frozenset[str]]]:
    """Every module's direct imports, with and without its "module:attribute" strings.
    Reading them parses the whole package (about half a second), and every Snakemake start
    needs them (each SLURM job starts two), so the graph is kept in GRAPH_CACHE under the
    digest of the sources it was read from: any change to any module, or a module added or
    removed, reads it again."""
    digest = source_digest()
    if (kept := _kept(digest)) is not None:
        return kept
    read = {m: {True: _edges_read(m, True), False: _edges_read(m, False)} for m in modules()}
    _keep(digest, read)
    return read


def _kept(digest: str) -> dict | None:
    """The cached graph if it was read from these sources (else None: absent, damaged, stale)."""
    try:
        kept = json.loads(GRAPH_CACHE.read_text())
        if kept.get("digest") == digest and set(kept["edges"]) == set(modules()):
            return {m: {True: frozenset(e["refs"]), False: frozenset(e["imports"])} for m, e in kept["edges"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _keep(digest: str, read: dict) -> None:
    """Write the cache whole or not at all (another process may read it now); a cache that
    cannot be written (a read-only checkout) is only not kept."""
    doc = {"digest": digest, "edges": {m: {"refs": sorted(e[True]), "imports": sorted(e[False])} for m, e in read.items()}}
    tmp = GRAPH_CACHE.with_name(f"{GRAPH_CACHE.name}.{os.getpid()}.tmp")
    try:
        GRAPH_CACHE.parent.mkdir(exist_ok=True)
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, GRAPH_CACHE)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def edges(module: str, references: bool = True) -> frozenset[str]:
    """The modules `module` imports directly (`references`: its "module:attribute" strings too)."""
    return graph()[module][references]


def closure(entries, skip=lambda importer, imported: False, references: bool = True) -> set[str]:
    """`entries` and every module they import, directly or not; `skip(a, b)` drops an edge
    (a registry importing every member to list them is not a member's computation);
    `references`: False leaves out what "module:attribute" strings name (what importing a
    module loads, before anything resolves them)."""
    seen, todo = set(), list(entries)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += [d for d in edges(m, references) if not skip(m, d)]
    return seen


def function_imports(module: str, function: str) -> set[str]:
    """The modules a top-level function of `module` imports in its body, and those of the
    module's other top-level functions it calls (by name), transitively."""
    defs = {n.name: n for n in _tree(module).body if isinstance(n, ast.FunctionDef)}
    if function not in defs:
        raise KeyError(f"{module} has no function {function}")
    seen, todo, found = set(), [function], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        body = list(ast.walk(defs[name]))
        found |= imported_by(body, module, False)
        todo += [n.func.id for n in body if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id in defs]
    return found


def files(names) -> list[str]:
    """The source files of modules, sorted."""
    return sorted(str(modules()[m]) for m in names)
