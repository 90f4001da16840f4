"""Configuration: load, validate against workflow/schemas/config.schema.yaml, digest.

A bad key or value stops the pipeline with one line that names the key, e.g.
`config error: pager_synthetic.main.ratios[1]: 1.5 is greater than the maximum of 1`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from residency.core.fault_vocabulary import CELLS, NEEDS_DEPTH

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"
# libyaml's loader where PyYAML has it: the same documents, 8x faster, and every Snakemake
# start (each SLURM job's included) reads the schema and the config.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(fh) -> Any:
    """yaml.safe_load, with libyaml where available."""
    return yaml.load(fh, Loader=YAML_LOADER)


class ConfigError(ValueError):
    """A configuration problem, with a one-line message naming the key."""


def load_schema(path: str | os.PathLike = SCHEMA_PATH) -> dict:
    """The schema, its fault cells filled from the engine's table (core.fault_vocabulary)."""
    with open(path) as fh:
        schema = read_yaml(fh)
    schema["$defs"]["fault_cell"]["enum"] = list(CELLS)
    return schema


def _key_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _one_line(err: jsonschema.ValidationError) -> str:
    where = _key_path(err.absolute_path)
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        keys = ", ".join(repr(k) for k in extra)
        return f"config error: {where}: unknown key {keys}"
    if err.validator == "required":
        return f"config error: {where}: {err.message}"
    return f"config error: {where}: {err.message}"


def validate(config: dict, schema: dict | None = None) -> dict:
    """Return `config` if valid, with any string where the schema wants a number or a
    boolean coerced in place (Snakemake's `--config` hands nested values over as strings);
    raise ConfigError (one line) otherwise."""
    schema = schema or load_schema()
    if "model" in _section(config, "pager_model"):
        raise ConfigError("config error: pager_model.model: now pager_model.models, a list whose first entry is "
                          f"the primary model (models: [{config['pager_model']['model']}])")
    if "reserve_bytes" in _section(config, "matched_source"):
        raise ConfigError("config error: matched_source.reserve_bytes: no longer a setting: R_policy is the calibrated "
                          "reserve R = O + margin (harness.overhead_margin); remove the key")
    validator = jsonschema.Draft202012Validator(schema)
    while (errors := sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))):
        if not any([_coerce(config, e) for e in errors]):  # a list: every coercible value in one pass
            best = jsonschema.exceptions.best_match(errors) or errors[0]
            raise ConfigError(_one_line(best).replace("\n", " "))
    _cross_check(config)
    return config


def _section(config: dict, name: str) -> dict:
    """The mapping `name` names, or {} when it is absent or not a mapping (the schema says so)."""
    value = config.get(name)
    return value if isinstance(value, dict) else {}


SCALARS = {"number": (int, float), "integer": (int,), "boolean": (bool,)}


def _coerce(config: dict, err: jsonschema.ValidationError) -> bool:
    """Replace the string `err` is about by the number or boolean it spells, when the schema
    wants one (`--config 'pager_model={"ratios": [0.5]}'` gives '0.5'); True if it did."""
    wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
    if err.validator != "type" or not isinstance(err.instance, str) or not err.absolute_path:
        return False
    try:
        value = yaml.safe_load(err.instance)
    except yaml.YAMLError:
        return False
    ok = tuple(t for w in wanted for t in SCALARS.get(w, ()))
    if not ok or isinstance(value, bool) != (bool in ok) or not isinstance(value, ok):
        return False  # bool is an int to Python: "true" is not an integer, 1 is not a boolean
    *parents, last = err.absolute_path
    node = config
    for key in parents:
        node = node[key]
    node[last] = value
    return True


def _cross_check(config: dict) -> None:
    """What the schema cannot say: references between sections and between keys."""
    pm = config.get("pager_model", {})
    if pm.get("huge_chunks") in ("move", "collapse") and pm.get("chunk_bytes", 0) % (2 << 20):
        raise ConfigError(f"config error: pager_model.huge_chunks: {pm['huge_chunks']!r} needs chunk_bytes to be "
                          f"a multiple of 2 MiB (it is {pm['chunk_bytes']}); use 'off'")
    ms = config.get("matched_source", {})
    if ms and ms.get("depth", 0) > ms.get("windows", 0):
        raise ConfigError(f"config error: matched_source.depth: {ms['depth']} is more than the "
                          f"{ms['windows']} windows (in-flight reads need a window each)")
    _check_faults(config.get("faults", {}))
    _check_models(config)


def _check_models(config: dict) -> None:
    """Each pager_model.models entry: a declared user model, and no two entries with one name;
    certificate.model, when a user model, declared too."""
    names = {m.get("name") for m in config.get("models", {}).get("user", [])}
    seen = set()
    for i, model in enumerate(config.get("pager_model", {}).get("models", [])):
        name = model[5:] if model.startswith("user:") else model
        if model.startswith("user:") and name not in names:
            raise ConfigError(f"config error: pager_model.models[{i}]: {model!r} is not declared under models.user "
                              "(add an entry with name, path and sha256)")
        if name in seen:
            raise ConfigError(f"config error: pager_model.models[{i}]: {model!r}: a second model named {name!r}")
        seen.add(name)
    cert = config.get("certificate", {}).get("model", "")
    if cert.startswith("user:") and cert[5:] not in names:
        raise ConfigError(f"config error: certificate.model: {cert!r} is not declared under models.user "
                          "(add an entry with name, path and sha256)")
    for section in ("cache_transfer", "speculative"):
        entry = config.get(section, {}).get("model", "")
        if entry.startswith("user:") and entry[5:] not in names:
            raise ConfigError(f"config error: {section}.model: {entry!r} is not declared under models.user "
                              "(add an entry with name, path and sha256)")
    for i, a in enumerate(config.get("faults", {}).get("adapters", [])):
        if a.startswith("user:") and a[5:] not in names:
            raise ConfigError(f"config error: faults.adapters[{i}]: {a!r} is not declared under models.user "
                              "(add an entry with name, path and sha256)")


def _check_faults(f: dict) -> None:
    """The fault campaign: C3's second-adapter set among the cells, each cell's firing point
    declared, and no cell on a source it cannot apply to."""
    if not f:
        return
    cells = f["cells"]
    for c in f["c3_second_adapter"]:
        if c not in cells:
            raise ConfigError(f"config error: faults.c3_second_adapter: {c!r} is not in faults.cells ({', '.join(cells)})")
    for c in cells:
        if c != "none" and c not in f["at"]:
            raise ConfigError(f"config error: faults.at: no firing point for cell {c!r} (add {c}: N)")
        if c in NEEDS_DEPTH and (f["source"] != "uring" or f["windows"] < 2):
            raise ConfigError(f"config error: faults.cells: {c!r} does not apply to source {f['source']} with "
                              f"{f['windows']} window(s): it needs reads in flight together (source uring, windows >= 2)")


def load(path: str | os.PathLike) -> dict:
    """Read and validate a config file."""
    try:
        with open(path) as fh:
            config = read_yaml(fh)
    except FileNotFoundError:
        raise ConfigError(f"config error: file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config error: {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config error: {path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise ConfigError(f"config error: {path}: cannot be read ({exc.strerror})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"config error: {path}: the top level must be a mapping")
    return validate(config)
