"""The run records' declared shapes: `harness.json` (the harness) and `run.json` (the
engine), as JSON Schemas in workflow/schemas/, checked once when a run is gathered so a
malformed record stops its gather with one line naming the file and the field, instead of
a wrong type surfacing later in a table or a claim."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"
KINDS = ("harness", "run")


class RecordError(ValueError):
    """A run record that does not have its declared shape: one line."""


@functools.cache
def validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text()))


def check(doc: dict, kind: str, path: str | Path) -> dict:
    """`doc` when it has the shape of a `kind` record (harness or run); else RecordError
    naming `path`, the first offending field and why."""
    error = jsonschema.exceptions.best_match(validator(kind).iter_errors(doc))
    if error is not None:
        where = (error.json_path.removeprefix("$") or "/").replace(".", "/")
        # A key is the record's text: a line break in one must not break the message.
        where = "".join(c if c.isprintable() else repr(c)[1:-1] for c in where)
        raise RecordError(f"{path}: {where}: {' '.join(error.message.split())[:200]}")
    return doc
