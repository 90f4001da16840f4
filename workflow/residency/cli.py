"""The `residency` command: the pipeline's steps, each callable by hand as by Snakemake.

Errors are one line on stderr and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path

SWEEP_MODEL_HELP = ("a further model of pager_model.models: its model claims in claims/models/<name>/, "
                    "their ledger beside them")

def _cmd_run(a) -> int:
    from residency.run import harness

    return harness.main_run(a)


def _cmd_overhead(a) -> int:
    from residency.run import overhead

    rec = overhead.calibrate(a.run_dirs, a.out, a.margin, a.margin_min_bytes, a.spread_factor)
    print(f"residency overhead: O = {rec['overhead_bytes']} bytes ({rec['method']}), reserve R = "
          f"{rec['reserve_bytes']} bytes", file=sys.stderr)
    return 0


def _cmd_validate(a) -> int:
    from residency.core import config

    config.load(a.config)
    print(f"{a.config}: valid")
    return 0


def _cmd_unlock(a) -> int:
    from residency.core import locks

    what, pids = locks.clear_stale(a.dir)
    where = Path(a.dir).resolve()
    if what == "held":
        print(f"residency unlock: {where} is locked by a running Snakemake (pid {', '.join(map(str, pids))}): "
              "left alone", file=sys.stderr)
        return 1
    if what == "stale" or not a.if_stale:
        print(f"residency unlock: {where}: " + ("removed a stale lock (no Snakemake process runs there)"
                                                if what == "stale" else "not locked"), file=sys.stderr)
    return 0


def _cmd_machine(a) -> int:
    from residency.core import atomic, machine

    atomic.write_json(a.out, machine.describe())
    return 0


def _cmd_region_identity(a) -> int:
    from residency.core import atomic
    from residency.core.identity import sha256_file

    p = Path(a.region)
    atomic.write_json(a.out, {"path": str(p), "bytes": p.stat().st_size, "seed": a.seed,
                              "sha256": sha256_file(p)})
    return 0


def _cmd_gather(a) -> int:
    t = _gather(a)
    print(f"residency gather: {t.num_rows} runs -> {a.out}", file=sys.stderr)
    return 0


def _gather(a):
    """`residency gather STUDY`: the registered gather's command (campaigns/studies.py), given
    the options it declares, once the CLI has said which of those it needs are missing."""
    from residency.core.imports import resolve

    g = _registered_gather(a.study)
    _need(a, *g.needs)
    # By keyword: a command's parameters need not come in (run_dirs, out, ...) order.
    return resolve(g.command)(run_dirs=a.run_dirs, out=a.out, **{o: getattr(a, o) for o in g.needs + g.takes})


def _registered_gather(choice: str | None):
    from residency.campaigns import studies

    return studies.gathers().get(choice)


def _handler(command: str, choice: str):
    """The function that runs `residency COMMAND CHOICE`: _COMMAND_CHOICE (code_of reads the
    same name, so an output's code inputs are what its command runs)."""
    return globals()[f"_{command}_{choice}".replace("-", "_")]


def _choices(command: str) -> list[str]:
    """The choices of `residency COMMAND`: one per handler _COMMAND_CHOICE (see _handler)."""
    prefix = f"_{command}_"
    return sorted(n[len(prefix):].replace("_", "-") for n, f in globals().items() if n.startswith(prefix) and callable(f))


# Commands whose subcommands and handlers live in their own module (register(sub)).
REGISTERED_BY = {"model": "residency.inputs.models_cli", "premise": "residency.evidence.premise"}
CLAIM_MODULE = re.compile(r"^residency\.claims\.[cp]\d+$")


def code_of(command: str, choice: str | None = None) -> list[str]:
    """The source files `residency COMMAND [CHOICE]` can execute (core.imports: the modules
    its handler imports and everything they import): an output's Snakemake `code` inputs.
    A claim's are its own module's, not its siblings' (the registry imports them all)."""
    from residency.core import imports

    cli = "residency.cli"
    if command in REGISTERED_BY:
        entries = {REGISTERED_BY[command]}
    elif command == "gather" and (g := _registered_gather(choice)):
        entries = {imports.module_of(g.command)}
    elif choice and f"_{command}_{choice}".replace("-", "_") in globals():
        entries = imports.function_imports(cli, f"_{command}_{choice}".replace("-", "_"))
    else:
        entries = imports.function_imports(cli, f"_cmd_{command.replace('-', '_')}")
    own = f"residency.claims.{choice.lower()}" if command == "claim" and choice else None
    if own:
        entries |= {own}
    skip = lambda a, b: a == "residency.claims" and bool(CLAIM_MODULE.match(b)) and b != own  # noqa: E731
    return imports.files(imports.closure(entries, skip))


def _need(a, *names) -> None:
    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(a, n, None) is None]
    if missing:
        raise SystemExit(f"residency: error: {a.command} {a.study} needs {', '.join(missing)}")


def _cmd_analyse(a) -> int:
    from residency.analysis import opt as analysis

    if a.study == "pager-synthetic":
        _need(a, "determinism_out")
        analysis.analyse_pager_synthetic(a.runs, a.opt_out, a.determinism_out)
    else:
        analysis.analyse_pager_model(a.runs, a.opt_out)
    return 0


def _cmd_figure(a) -> int:
    from residency.render import figures

    draw = {"02": figures.fig02_miss_rate_vs_optimal, "06": figures.fig06_real_model_bytes,
            "07": figures.fig07_throughput_scaling, "08": figures.fig08_matched_source_pairs,
            "04": figures.fig04_reclaim_authority}[a.figure]
    if a.figure in ("06", "07"):
        draw(a.runs, a.opt, a.out_stem, roofline=a.roofline)
    else:
        draw(a.runs, a.opt, a.out_stem)
    return 0


def _cmd_table(a) -> int:
    if a.table != "models" and not a.runs:
        raise SystemExit(f"residency: error: table {a.table} needs --runs")
    _handler("table", a.table)(a)
    return 0


def _table_models(a):
    from residency.render import tables

    if not a.models:
        raise SystemExit("residency: error: table models needs --models (a JSON list of models)")
    tables.models_summary(json.loads(a.models), a.out_stem)


def _table_table11_claim_map(a):
    from residency.render.tables_ledger import table11_claim_map

    table11_claim_map(a.runs, a.out_stem)


def _table_reference_values(a):
    from residency.render.tables_ledger import reference_values_table

    reference_values_table(a.runs, a.out_stem)


def _table_table7_faults(a):
    from residency.render.tables_faults import table7_faults

    table7_faults(a.runs, a.out_stem)


def _table_table4_identity(a):
    from residency.render.tables_faults import table4_identity

    parts = a.runs.split(",")
    if len(parts) != 5:
        raise SystemExit("residency: error: table table4-identity needs --runs "
                         "CERTIFICATE,MATCHED,BOUNDED,FAULTS,WARM "
                         f"(five Parquet tables, comma-separated; got {len(parts)})")
    table4_identity(*parts, a.out_stem)


def _table_table9_populations(a):
    from residency.render.tables_appendix import table9_populations

    table9_populations(a.runs.split(","), a.out_stem)


def _table_table1_obligations(a):
    from residency.render.tables_certificate import table1_obligations

    table1_obligations(a.runs, a.out_stem)


def _table_table3_principal(a):
    from residency.render.tables_certificate import table3_principal

    table3_principal(a.runs.split(","), a.out_stem)


def _table_table10_negative_results(a):
    from residency.render.tables_certificate import table10_negative

    table10_negative(a.runs.split(","), a.out_stem)


def _table_table5_certificate(a):
    from residency.render.tables_certificate import table5_certificate

    table5_certificate(a.runs, a.out_stem)


def _table_pager_model(a):
    from residency.render.tables import pager_model_summary

    pager_model_summary(a.runs, a.opt, a.out_stem, roofline=a.roofline)


def _table_pager_synthetic(a):
    from residency.render.tables import pager_synthetic_summary

    pager_synthetic_summary(a.runs, a.opt, a.out_stem)


def _table_table6_matched_pairs(a):
    from residency.render.tables import table6_matched_pairs

    table6_matched_pairs(a.runs, a.opt, a.out_stem)


def _cmd_certificate(a) -> int:
    from residency.evidence import certificate
    from residency.evidence.demand import DemandError

    model = json.loads(Path(a.model_identity).read_text())
    try:
        cert = certificate.build(a.run, a.oracle, {k: model.get(k) for k in ("path", "sha256", "bytes")},
                                 a.reserve_bytes)
    except (DemandError, FileNotFoundError, KeyError) as exc:
        raise SystemExit(f"residency certificate: error: {exc}") from None
    certificate.write(cert, a.out)
    print(f"residency certificate: exact {cert['E']['exact']}, classes R {cert['classes']['R']} "
          f"W {cert['classes']['W']}, admissible {cert['admissible']}, lifecycle closed {cert['classes']['L']}"
          f" -> {a.out}", file=sys.stderr)
    return 0


def _cmd_claim(a) -> int:
    from residency import claims
    from residency.claims import history

    settings = json.loads(a.settings) if a.settings else _config(a.config)["claims"]
    protocol = json.loads(a.protocol) if a.protocol else _protocol_from_config(a.config, a.claim_id)
    out = Path(a.out) if a.out else Path(a.root) / "claims" / f"{a.claim_id}.json"
    doc = claims.make(a.claim_id, Path(a.root), settings, out, protocol, a.results)
    print(f"residency claim {a.claim_id}: {doc['verdict']}: {doc['headline']}", file=sys.stderr)
    for r in doc["reasons"]:
        print(f"  - {r}", file=sys.stderr)
    seen = history.tally(history.read(history.path_for(out, a.claim_id)), history.scope_digest(doc))
    if seen["computed_on_scope"] > 1:
        print(f"  computed {seen['computed_on_scope']} times on this scope; verdicts seen: "
              f"{seen['verdicts_on_scope']} (claims/history/{a.claim_id}.jsonl)", file=sys.stderr)
    return 0


def _config(path: str) -> dict:
    from residency.core import config

    return config.load(path)


def _protocol_from_config(path: str, claim_id: str) -> dict:
    from residency.campaigns import cells
    from residency import claims
    from residency.claims import protocol

    return protocol.of(cells.model_view(_config(path)), claims.input_paths(claim_id))  # as the claim rule does


def _cmd_ledger(a) -> int:
    from residency import claims

    led = claims.ledger([Path(p) for p in a.records], Path(a.out))
    for e in led["claims"]:
        print(f"{e['id']}: {e['verdict']} (computed {e['computed_on_scope']} times on this scope: "
              f"{e['verdicts_on_scope']})", file=sys.stderr)
    return 0


def _cmd_verify(a) -> int:
    from residency.claims import verify

    root = Path(a.root)
    if a.all:
        found = verify.verify_all(root, deep=a.deep, model=a.model)
        codes = [_report("verify", cid, problems, root, a.model) for cid, problems in found.items()]
        return max(codes)
    return _report("verify", a.claim, verify.verify(a.claim, root, deep=a.deep, model=a.model), root, a.model)


def _cmd_replay(a) -> int:
    from residency.claims import verify

    problems = verify.replay(a.claim, Path(a.root), a.model)
    return _report("replay", a.claim, problems, Path(a.root), a.model)


def _report(what: str, claim: str, problems: list[str], root: Path, model: str | None = None) -> int:
    from residency.claims import verify

    if problems:
        print(f"residency {what} {claim}: FAILED ({len(problems)} problems)")
        for p in problems:
            print(f"  - {p}")
        return 1
    if claim == verify.LEDGER:
        print(f"residency {what} {verify.ledger_file(model)}: OK; every claim listed, every digest and count matches")
        return 0
    doc = json.loads(verify.record_path(claim, root, model).read_text())
    print(f"residency {what} {claim}: OK; verdict {doc['verdict']}: {doc['headline']}")
    return 0


def _cmd_summary(a) -> int:
    from residency.core import atomic
    from residency.claims import summary

    root = Path(a.root)
    if a.check:
        problem = summary.check(Path(a.check), root)
        if problem:
            print(f"residency summary: {problem}", file=sys.stderr)
            return 1
        print(f"residency summary: {a.check} is up to date with the claim records", file=sys.stderr)
        return 0
    if a.update:
        summary.update(Path(a.update), root)
        return 0
    text = summary.render(root)
    if a.out:
        atomic.write_text(a.out, text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_report_page(a) -> int:
    from residency.render import report_pages

    if a.page == "ledger":
        report_pages.write_ledger_page(a.ledger, a.out)
    else:
        report_pages.write_scope_page(a.machine, a.probe, a.scope_json, a.parquet, a.out)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="residency", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_add_cell_commands, _add_gather_commands, _add_render_commands, _add_claim_commands):
        add(sub)
    for module in REGISTERED_BY.values():
        importlib.import_module(module).register(sub)
    return p


def _add_cell_commands(sub) -> None:
    """The commands of one cell and its inputs: run, overhead, validate-config, unlock, machine, region-identity."""
    s = sub.add_parser("run", help="run one residctl command inside its own memory cgroup")
    s.add_argument("--out", required=True, help="the run directory (cleared first)")
    s.add_argument("--limit-bytes", type=int, default=None, help="hard host limit; omit for none")
    s.add_argument("--budget-bytes", type=int, default=None,
                   help="weight budget r*T_repr; with --overhead the limit is budget + O")
    s.add_argument("--overhead", default=None, help="calibration record giving O (residency overhead)")
    s.add_argument("--cgroup", choices=["auto", "required", "off"], default="auto")
    s.add_argument("--cgroup-parent", default=None, help="make the run's cgroup under this directory")
    s.add_argument("--meta", action="append", help="key=value recorded in harness.json (repeatable)")
    s.add_argument("--drop-cache", action="append", default=[],
                   help="drop this file's clean page cache before the run (repeatable)")
    s.add_argument("--reclaim-fraction", type=float, default=None,
                   help="a reclaim cell (P3): pressure at O + this fraction of the budget, swap available")
    s.add_argument("--swap-bytes", type=int, default=None, help="reclaim cell: the swap file it turns on")
    s.add_argument("--swap-dir", default=None, help="reclaim cell: where the swap file is made")
    s.add_argument("--gpu-declared-bytes", type=int, default=None,
                   help="the declared whole-board GPU allowance G_decl the NVML observer audits (default 0)")
    s.add_argument("--gpu-interval-s", type=float, default=0.05, help="NVML sampling interval (default 0.05 s)")
    s.add_argument("cmd", nargs=argparse.REMAINDER, help="-- residctl ...")
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser("overhead", help="the non-weight overhead O from calibration runs, and its reserve R")
    s.add_argument("--out", required=True)
    s.add_argument("--margin", type=float, default=0.0, help="R = O + max(margin x O, --margin-min-bytes)")
    s.add_argument("--margin-min-bytes", type=int, default=0, help="the least margin, bytes")
    s.add_argument("--spread-factor", type=float, default=0.0,
                   help="the margin is at least this x the widest spread of one arm's calibration runs")
    s.add_argument("run_dirs", nargs="+")
    s.set_defaults(func=_cmd_overhead)

    s = sub.add_parser("validate-config", help="check a config file against the schema")
    s.add_argument("config")
    s.set_defaults(func=_cmd_validate)

    s = sub.add_parser("unlock", help="remove a Snakemake lock that no live run holds (one a killed run left)")
    s.add_argument("--dir", default=".", help="the working directory (default: here)")
    s.add_argument("--if-stale", action="store_true", help="say nothing when there is no lock (make figures)")
    s.set_defaults(func=_cmd_unlock)

    s = sub.add_parser("machine", help="record the machine identity")
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_machine)

    s = sub.add_parser("region-identity", help="record a region file's size and sha256")
    s.add_argument("--region", required=True)
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_region_identity)


def _add_gather_commands(sub) -> None:
    """Run directories to tables: gather (its choices and options from the study registry),
    certificate, analyse."""
    from residency.campaigns import studies

    s = sub.add_parser("gather", help="run directories -> one Parquet table per study")
    s.add_argument("study", choices=sorted(studies.gathers()))
    _add_gather_options(s)
    s.add_argument("--out", required=True)
    s.add_argument("run_dirs", nargs="+")
    s.set_defaults(func=_cmd_gather)

    s = sub.add_parser("certificate", help="the record C = (I, B, A, E, L) of a certified run (certificate.json)")
    s.add_argument("--run", required=True, help="the certified run directory (run.json, harness.json, ...)")
    s.add_argument("--oracle", required=True, help="its same-build oracle's run directory")
    s.add_argument("--model-identity", required=True, help="the model's identity record (path, sha256, bytes)")
    s.add_argument("--reserve-bytes", type=int, required=True, help="R_policy (eq. 1)")
    s.add_argument("--out", required=True)
    s.set_defaults(func=_cmd_certificate)

    s = sub.add_parser("analyse", help="Belady bound per run (and determinism per cell)")
    s.add_argument("study", choices=["pager-synthetic", "pager-model"])
    s.add_argument("--runs", required=True)
    s.add_argument("--opt-out", required=True)
    s.add_argument("--determinism-out", help="pager-synthetic: determinism per cell")
    s.set_defaults(func=_cmd_analyse)


def _add_gather_options(s) -> None:
    """The registry's gather options (campaigns/studies.py), each saying which gathers use it."""
    from residency.campaigns import studies

    users = {o: [g.name for g in studies.gathers().values() if o in g.needs + g.takes] for o in studies.GATHER_OPTIONS}
    for o, (kind, what) in studies.GATHER_OPTIONS.items():
        s.add_argument(f"--{o.replace('_', '-')}", type=kind, help=f"{', '.join(users[o])}: {what}" if users[o] else what)


def _add_render_commands(sub) -> None:
    """Figures and paper tables."""
    s = sub.add_parser("figure", help="draw a figure from Parquet")
    s.add_argument("figure", choices=["02", "04", "06", "07", "08"])
    s.add_argument("--runs", required=True)
    s.add_argument("--opt", default=None, help="the OPT table (figures 02, 06, 07)")
    s.add_argument("--roofline", default=None, help="figures 06, 07: the roofline calibration table "
                                                    "(results/pager_model_roofline.parquet)")
    s.add_argument("--out-stem", required=True, help="path without extension; .png and .pdf are written")
    s.set_defaults(func=_cmd_figure)

    s = sub.add_parser("table", help="write a paper table (csv, md, tex) from Parquet")
    s.add_argument("table", choices=_choices("table"))
    s.add_argument("--runs", default=None, help="the runs' Parquet (every table but models); table3-principal, "
                                                "table10-negative-results: claim records, comma-separated; table5-certificate: certificate.json; "
                                                "table1-obligations: certificate.parquet (or certificate.json); "
                                                "table11-claim-map, reference-values: claims/ledger.json; "
                                                "table4-identity: certificate, matched-source, faults and reset-warm "
                                                "Parquet, comma-separated")
    s.add_argument("--models", default=None,
                   help="models: JSON list of {name, runs, opt, inventory, claims: [record paths]}")
    s.add_argument("--opt", default=None, help="the OPT table (pager tables)")
    s.add_argument("--roofline", default=None, help="pager-model: the roofline calibration table")
    s.add_argument("--out-stem", required=True)
    s.set_defaults(func=_cmd_table)


def _add_claim_commands(sub) -> None:
    """Claims and what checks and shows them: claim, ledger, verify, replay, summary, report-page."""
    s = sub.add_parser("claim", help="compute a claim record from Parquet")
    s.add_argument("claim_id")
    s.add_argument("--root", default=".")
    s.add_argument("--out", default=None)
    s.add_argument("--config", default="config/config.yaml", help="settings come from its 'claims' section")
    s.add_argument("--settings", default=None, help="the settings as JSON (instead of --config)")
    s.add_argument("--protocol", default=None,
                   help="the campaign design as JSON (protocol.py; instead of --config)")
    s.add_argument("--results", default=None,
                   help="a model claim of the sweep: read the model's Parquet from this directory (results/sweep/<name>)")
    s.set_defaults(func=_cmd_claim)

    s = sub.add_parser("ledger", help="write claims/ledger.json from claim records")
    s.add_argument("--out", default="claims/ledger.json")
    s.add_argument("records", nargs="+")
    s.set_defaults(func=_cmd_ledger)

    s = sub.add_parser("verify", help="check claim records: input digests, assertions, history, ledger")
    which = s.add_mutually_exclusive_group(required=True)
    which.add_argument("--claim", help="one claim")
    which.add_argument("--all", action="store_true", help="every claim of the registry and the ledger itself")
    s.add_argument("--deep", action="store_true",
                   help="also re-check every run manifest, gather and analyse again, and replay")
    s.add_argument("--root", default=".")
    s.add_argument("--model", help=SWEEP_MODEL_HELP)
    s.set_defaults(func=_cmd_verify)

    s = sub.add_parser("replay", help="recompute a claim's values from its inputs")
    s.add_argument("--claim", required=True)
    s.add_argument("--root", default=".")
    s.add_argument("--model", help=SWEEP_MODEL_HELP)
    s.set_defaults(func=_cmd_replay)

    s = sub.add_parser("summary", help="the measured section (docs/results.md) from the claim records (Markdown)")
    s.add_argument("--root", default=".")
    out = s.add_mutually_exclusive_group()
    out.add_argument("--out", default=None, help="write it to this file (default: standard output)")
    out.add_argument("--check", metavar="PAGE", default=None,
                     help="exit 1 when PAGE's generated section (docs/results.md) differs from the records")
    out.add_argument("--update", metavar="PAGE", default=None, help="rewrite PAGE's generated section")
    s.set_defaults(func=_cmd_summary)

    s = sub.add_parser("report-page", help="an HTML page of the Snakemake report: the claim ledger or the scope")
    s.add_argument("page", choices=["ledger", "scope"])
    s.add_argument("--out", required=True)
    s.add_argument("--ledger", default="claims/ledger.json", help="ledger: the ledger (its records are read too)")
    s.add_argument("--machine", help="scope: results/machine.json")
    s.add_argument("--probe", help="scope: results/probe.json")
    s.add_argument("--scope-json", default="{}", help="scope: what the config ran (report_pages.campaign_scope)")
    s.add_argument("--parquet", action="append", default=[], help="scope: a study's Parquet table (repeatable)")
    s.set_defaults(func=_cmd_report_page)




# The one-line input errors, by module. Looked up among the modules the command loaded (an
# error of a module that was never imported cannot be raised), so a command imports only
# what it uses: `residency run`, once per cell, stays clear of scipy and pandas.
INPUT_ERRORS = {"residency.core.config": "ConfigError", "residency.claims.history": "HistoryError",
                "residency.core.manifest": "ManifestError", "residency.claims.summary": "SummaryError",
                "residency.claims.verify": "VerifyError", "residency.gather.base": "GatherError"}


def _input_errors() -> tuple[type[BaseException], ...]:
    loaded = [getattr(sys.modules[m], name) for m, name in INPUT_ERRORS.items() if m in sys.modules]
    return (FileNotFoundError, *loaded)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "cmd", None) and args.cmd[:1] == ["--"]:
        args.cmd = args.cmd[1:]
    try:
        return args.func(args)
    except Exception as exc:
        if not isinstance(exc, _input_errors()):
            raise
        print(f"residency: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
