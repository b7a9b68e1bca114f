"""The ``zlops`` command line: the same library code paths the DAGs call.

Exit codes: 0 done; 1 a step failed (the message says which and why); 2 bad usage or config;
3 ``--fail-on`` matched a verdict; 4 a comparison refused for a caliber mismatch (``!!! [caliber]``);
5 (nightly) a shard failed, timed out or was skipped, or a series was invalid or failed;
128+N killed by signal N after ending its benchmarks (130 Ctrl-C, 129 SIGHUP, 143 SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from zlops import __version__
from zlops.cli.common import (
    EXIT_CALIBER,
    EXIT_ERROR,
    EXIT_FLAGGED,
    EXIT_OK,
    EXIT_SHARDS,
    EXIT_USAGE,
    config_name,
    config_of,
    found_config,
    positive,
)
from zlops.config.path import CONFIG_HELP, DEMO_HOME
from zlops.errors import (
    BackendUnavailable,
    CaliberMismatch,
    ConfigError,
    Interrupted,
    RunAlreadyAccepted,
    RunOwned,
    ZlopsError,
    os_error_line,
)
from zlops.redact import RedactingFilter, redact_text, redact_url

if TYPE_CHECKING:
    from zlops.backends.base import DeviceBackend
    from zlops.steps.nightly import NightlyResult

log = logging.getLogger("zlops.cli.app")

#: when several apply, the first of these wins
NIGHTLY_EXIT_PRIORITY = (EXIT_ERROR, EXIT_CALIBER, EXIT_FLAGGED, EXIT_SHARDS, EXIT_OK)
NIGHTLY_EXIT_HELP = ("exit codes: 0 every shard measured and nothing matched --fail-on; 1 a suite produced no "
                     "results at all (or a step failed); 2 bad usage or config, or refused (a run id another live "
                     "process runs, an accepted run without --replace); 3 --fail-on matched; 4 a series "
                     "was refused for a caliber break; 5 a shard failed, timed out or was skipped, or a series "
                     "was invalid or failed; 128+N stopped by signal N (130 Ctrl-C, 129 SIGHUP, 143 SIGTERM), "
                     "its benchmarks ended and the run marked interrupted. When several apply: 1, 4, 3, 5.")


def _setup_logging(verbose: int, interactive: bool) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose == 1 or not interactive else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for handler in logging.getLogger().handlers:  # no log line carries a secret (zlops.redact)
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    if verbose < 2:  # schema migrations narrate every plugin at INFO; only their warnings matter here
        logging.getLogger("alembic").setLevel(logging.WARNING)


def cmd_demo(args: argparse.Namespace) -> int:
    from zlops.demo import EXIT_NOT_MEASURED, render_summary, run_demo

    result = run_demo(Path(args.home), rounds=args.rounds, workers=args.workers, interactive=args.interactive,
                      judge=args.judge, contention=None if args.contention_gate else {"gate": False},
                      measure=args.measure)
    print(render_summary(result))
    if result.ok:
        return EXIT_OK
    return EXIT_NOT_MEASURED if result.could_not_measure else EXIT_ERROR


def nightly_exit_code(result: NightlyResult, fail_on: str) -> int:
    """The exit code one suite's night earns (see :data:`NIGHTLY_EXIT_HELP`)."""
    from zlops.model import ShardStatus, Verdict

    if not result.ok:
        return EXIT_ERROR
    if result.summary.count(Verdict.INCOMPARABLE):
        return EXIT_CALIBER
    bad = {"regression": (Verdict.REGRESSION, Verdict.SEVERE),
           "potential": (Verdict.REGRESSION, Verdict.SEVERE, Verdict.POTENTIAL)}
    if result.summary.count(*bad.get(fail_on, ())):
        return EXIT_FLAGGED
    if any(s.status is not ShardStatus.OK for s in result.shards) or \
            result.summary.count(Verdict.INVALID, Verdict.FAILED):
        return EXIT_SHARDS
    return EXIT_OK


def _worst(codes: Sequence[int]) -> int:
    return next((c for c in NIGHTLY_EXIT_PRIORITY if c in codes), EXIT_OK)


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def cmd_nightly(args: argparse.Namespace) -> int:
    import signal

    # SIGTERM and SIGHUP (Airflow, systemd, a closed terminal) end the night the way Ctrl-C does:
    # the benchmarks' process groups are ended and the run is marked interrupted (zlops.steps.nightly)
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _nightly(args)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _nightly(args: argparse.Namespace) -> int:
    from zlops.progress import make_progress
    from zlops.slack.outbox import client_for
    from zlops.steps.nightly import run_nightly

    config = config_of(args)
    if args.allow_caliber_mismatch:
        config = config.model_copy(update={"allow_caliber_mismatch": True})
    suites = [args.suite] if args.suite else sorted(config.suites)
    if args.sha and len(suites) > 1:
        raise ConfigError("--sha needs --suite: a commit belongs to one suite's upstream")
    if args.promote and not args.suite:
        raise ConfigError("--promote needs --suite: it overrides one suite's baseline rules")
    client = client_for(config.slack)
    progress = make_progress(args.interactive)
    codes = []
    try:
        for name in suites:
            config.suite(name)
            result = run_nightly(config, name, sha=args.sha, run_label=args.run_id, progress=progress,
                                 slack_client=client, promote=args.promote, replace=args.replace)
            progress.note(result.report.console)
            progress.note(f"report: {result.report.markdown}")
            for p in result.report.plots:
                progress.note(f"plot:   {p}")
            if result.report.slack is not None:
                progress.note(f"slack:  {result.report.slack.status} ({result.report.slack.path})")
            codes.append(nightly_exit_code(result, args.fail_on))
            if not result.ok:
                progress.note(f"suite {name}: no shard produced results")
            elif codes[-1] == EXIT_SHARDS:
                bad = [s for s in result.shards if s.status.value != "ok"]
                progress.note(f"suite {name}: {len(bad)} of {len(result.shards)} shards did not measure: "
                              + "; ".join(f"{s.pool}/{s.device} {s.status.value}" for s in bad[:8]))
    finally:
        progress.close()
    return _worst(codes)


def cmd_config_check(args: argparse.Namespace) -> int:
    config = config_of(args)
    print(f"ok: {len(config.pools)} pools, {len(config.suites)} suites; home {config.home}; "
          f"database {redact_url(config.database_url)}")
    for name, suite in sorted(config.suites.items()):
        print(f"  suite {name}: {redact_url(suite.repo)} @ {suite.branch}, format {suite.format}, "
              f"pools {', '.join(suite.pools)}, schedule {suite.schedule}")
    return EXIT_OK


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from zlops.steps.context import open_store

    store = open_store(config_of(args))
    print(f"schema at revision {store.current_revision()}")
    return EXIT_OK


def cmd_store_check(args: argparse.Namespace) -> int:
    """``zlops store check``: the thorough health check of the config's store (docs/store.md)."""
    from zlops.store import Store
    from zlops.store.health import check_store
    from zlops.store.retry import RetryPolicy

    config = config_of(args)
    store = Store.open(config.database_url, migrate=False, check=False,
                       retry=RetryPolicy(total_s=min(5.0, config.database_retry_s)), connect_timeout_s=5)
    try:
        health = check_store(store, thorough=True)
        revision = store.current_revision()
    finally:
        store.dispose()
    print(f"ok: {health.url}: {health.checked}; schema at revision {revision or 'none (never migrated)'}")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    from zlops.model import shown_run_status
    from zlops.steps.context import open_store

    config = config_of(args)
    store = open_store(config, read_only=True)
    runs = store.list_runs(suite=args.suite, limit=args.limit)
    shards = store.shard_statuses([run.run_key for run in runs]) if runs else {}
    if args.suite and not runs and args.suite not in config.suites:
        raise ConfigError(f"suite {args.suite!r} does not exist: it is not in {config_name(args)} and no run of it "
                          f"is stored; configured suites: {', '.join(sorted(config.suites))}")
    rows = [("started", "status", "accepted", "commit", "run")]
    rows += [(run.started_at.isoformat(timespec="seconds") if run.started_at else "-",
              shown_run_status(run.status, shards.get(run.run_key, ())),
              "accepted" if run.accepted else "", run.sha[:12], run.run_key) for run in runs]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if not runs:
        where = f" of suite {args.suite}" if args.suite else ""
        print(f"zlops: no runs stored{where} yet in {redact_url(config.database_url)}", file=sys.stderr)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from zlops.steps.context import context_for, open_store
    from zlops.steps.report import report

    config = config_of(args)
    run = open_store(config).get_run(args.run_key)
    if run is None:
        raise ZlopsError(f"unknown run {args.run_key!r}; list runs with `zlops runs`")
    out = report(context_for(config, run.suite, run.run_key), rerender=True)
    print(out.console)
    print(f"report: {out.markdown}")
    note = out.markdown.parent / "rerender.txt"
    if note.exists():  # what the re-render read, and that the original artifacts were left alone
        print(note.read_text(encoding="utf-8"), end="")
    return EXIT_OK


def _format_hint(fmt: str, path: Path) -> str:
    """Which other formats read the file, for a file parsed with the wrong --format ('' when none)."""
    from zlops.formats import detect_file_formats

    fits = detect_file_formats(path, exclude=fmt)
    if not fits:
        return ""
    best = max(fits, key=lambda name: fits[name])
    return (f"; it reads as {', '.join(f'{n} ({k} rows)' for n, k in sorted(fits.items()))}: "
            f"try --format {best}")


def cmd_parse(args: argparse.Namespace) -> int:
    from zlops.errors import ParseError
    from zlops.formats import format_descriptions, parse_results

    path = Path(args.file)
    try:
        results = parse_results(args.format, path)
    except ParseError as exc:
        hint = _format_hint(args.format, path) if path.is_file() and args.format in format_descriptions() else ""
        raise ParseError(f"{exc}{hint}") from None
    if not results:  # a file of another format can parse to nothing (no marker lines): never a silent 0
        expected = format_descriptions()[args.format]
        raise ParseError(f"{path}: no results found in the {args.format} format, which is {expected}"
                         f"{_format_hint(args.format, path) or '; no other format reads it either'}")
    if args.json:
        print(json.dumps([{"case": r.case, "metric": r.metric, "unit": r.unit, "lower_is_better": r.lower_is_better,
                           "samples": list(r.samples), "params": dict(r.params)} for r in results], indent=1,
                         default=str))
    else:
        for r in results:
            print(f"{r.case}\t{r.metric}\t{r.median:.6g} {r.unit}\t(n={len(r.samples)})")
    return EXIT_OK


def cmd_airflow_pools(args: argparse.Namespace) -> int:
    config = config_of(args)
    if args.dry_run:
        from zlops.airflow.pools import planned_pools

        for name, desc in planned_pools(config).items():
            print(f"{name}\t1\t{desc}")
        return EXIT_OK
    try:
        from zlops.airflow.pools import sync_pools
    except ImportError as exc:
        raise ZlopsError(f"Airflow is not installed here ({exc}); pip install 'zlops[airflow]'") from None
    for name in sync_pools(config):
        print(f"pool {name}: 1 slot")
    return EXIT_OK


def _backend(args: argparse.Namespace) -> DeviceBackend:
    from zlops.backends import get_backend, get_spec

    if not (args.backend or os.environ.get("ZL_BACKEND")):
        raise ConfigError("no backend named: pass --backend NAME or set ZL_BACKEND")
    try:
        get_spec(args.backend or os.environ["ZL_BACKEND"])
    except BackendUnavailable as exc:  # a name that is no backend is a usage error; a missing tool is not
        raise ConfigError(str(exc)) from None
    return get_backend(args.backend)


def _commit_sha(text: str) -> str:
    """``--sha``: the one SHA rule (:data:`zlops.host.gitops.COMMIT_SHA_PATTERN`, the trigger form's); a bad
    value is a usage error (exit 2) before anything runs."""
    from zlops.host.gitops import check_commit_sha

    try:
        return check_commit_sha(text, what="--sha")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--sha: ")) from None


def _run_label(text: str) -> str:
    from zlops.steps.context import run_label_problem

    problem = run_label_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _device_list(text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated device indices like 0,1, got {text!r}") from None


def cmd_devices(args: argparse.Namespace) -> int:
    from zlops.errors import DeviceBusy
    from zlops.run import devices

    backend = _backend(args)
    infos = sorted(backend.enumerate(), key=lambda i: i.index)
    try:
        picked, why = devices.resolve_devices(backend, None), ""
    except DeviceBusy as exc:
        picked, why = [], str(exc)
    idle = {i.index: devices.is_idle(i) if backend.reports_idleness else None for i in infos}
    if args.json:
        print(json.dumps({"backend": backend.name, "auto_devices": picked, "auto_error": why or None, "devices": [
            {"index": i.index, "model": i.model, "healthy": i.healthy, "health": i.extra.get("health"),
             "memory_used_mib": i.memory_used_mib, "memory_total_mib": i.memory_total_mib,
             "processes": i.processes, "idle": idle[i.index], "driver": i.driver, "toolkit": i.toolkit}
            for i in infos]}, indent=1))
        return EXIT_OK

    def cell(v: float | None) -> str:
        return "?" if v is None else f"{v:.0f}"

    rows = [("index", "model", "health", "memory used/total MiB", "processes", "idle")]
    rows += [(str(i.index), i.model, str(i.extra.get("health") or ("OK" if i.healthy else "unhealthy")),
              f"{cell(i.memory_used_mib)} / {cell(i.memory_total_mib)}",
              "?" if i.processes is None else str(i.processes),
              {True: "yes", False: "no", None: "-"}[idle[i.index]]) for i in infos]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    print(f"auto-picked: {','.join(map(str, picked))}" if picked else f"auto-picked: none ({why})")
    return EXIT_OK


def cmd_telemetry(args: argparse.Namespace) -> int:
    import tempfile
    import time

    from zlops.host.telemetry import CSV_NAME, ERR_NAME, read_csv, summarize

    backend = _backend(args)
    wanted = list(args.devices or [])
    if not wanted and backend.spec.visibility_env is None:  # nothing pins it: sample what it lists
        wanted = [i.index for i in backend.enumerate()]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".zlops-telemetry-", dir=out.parent) as tmp:
        sampler = backend.telemetry_sampler(wanted, Path(tmp), interval_s=args.interval_ms / 1000)
        sampler.start()
        try:
            time.sleep(args.duration_s)
        except KeyboardInterrupt:  # Ctrl-C ends sampling early and keeps what was sampled
            pass
        finally:
            sampler.stop()
        if (Path(tmp) / CSV_NAME).exists():
            os.replace(Path(tmp) / CSV_NAME, out)
        err_path = Path(tmp) / ERR_NAME
        err = err_path.read_text(encoding="utf-8").strip() if err_path.exists() else ""
    rows = read_csv(out) if out.exists() else []
    if err:
        print(f"zlops: telemetry: {err}", file=sys.stderr)
    if not rows:
        print(f"zlops: no telemetry sampled from {backend.name}", file=sys.stderr)
        return EXIT_ERROR
    print(f"{len(rows)} samples from {backend.name} -> {out}")
    for index in sorted({int(r["index"]) for r in rows}):
        summary = summarize([r for r in rows if int(r["index"]) == index])
        print(f"device {index}: " + ", ".join(f"{k}={v:.4g}" for k, v in summary.items()))
    return EXIT_OK


def cmd_bundle_verify(args: argparse.Namespace) -> int:
    from zlops.run.bundle import BundleReport, find_bundles, verify_bundle

    reports: list[BundleReport] = []
    for d in args.dirs:
        try:
            bundles = find_bundles(Path(d))
        except ZlopsError as exc:
            reports.append(BundleReport(Path(d), (str(exc),)))
            continue
        reports += [verify_bundle(b) for b in bundles]
    if args.json:
        print(json.dumps({"ok": all(r.ok for r in reports), "bundles": [r.to_json() for r in reports]}, indent=1))
    else:
        for r in reports:
            print("\n".join(r.lines()))
        bad = sum(not r.ok for r in reports)
        print(f"{len(reports) - bad} of {len(reports)} bundles ok" + (f", {bad} with problems" if bad else ""))
    return EXIT_OK if all(r.ok for r in reports) else EXIT_ERROR


def cmd_ab(args: argparse.Namespace) -> int:
    from zlops.judge.ab import AbRefused, caliber_json, compare_bundles, render_ab

    allow_no_ir = args.allow_no_ir_diff or os.environ.get("SWITCH_ALLOW_NO_IR_DIFF") == "1"
    try:
        report = compare_bundles([Path(args.a_dir)], [Path(args.b_dir)],
                                 allow_caliber_mismatch=args.allow_caliber_mismatch, allow_no_ir_diff=allow_no_ir,
                                 fingerprint_globs=tuple(args.fingerprint or ()), metric=args.metric)
    except AbRefused as exc:
        if args.json:
            print(json.dumps({"refused": True, "caliber": caliber_json(exc.caliber)}, indent=1, default=str))
        else:
            print("\n".join(exc.caliber.lines()))
        print("zlops: A/B refused: the two sides were measured on different calibers (see !!! [caliber] above); "
              "--allow-caliber-mismatch compares anyway", file=sys.stderr)
        return EXIT_CALIBER
    if args.json:
        print(json.dumps(report.to_json(), indent=1, default=str))
    else:
        print(render_ab(report), end="")
    if not report.pairs and not report.no_ir_diff:
        print("zlops: no case succeeded on both sides with a positive value: nothing was compared", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated device indices, got {text!r}") from None


def cmd_compare(args: argparse.Namespace) -> int:
    from zlops.forge.prcompare import report, run_compare
    from zlops.model import Verdict
    from zlops.slack.outbox import client_for

    config = config_of(args)
    conf: dict[str, object] = {"suite": args.suite, "ref": args.ref, "pairs": args.pairs}
    for key in ("devices", "rounds", "pool", "pr"):
        if getattr(args, key) is not None:
            conf[key] = getattr(args, key)
    if args.variants:
        conf["variants"] = [v for v in args.variants.split(",") if v]
    client = client_for(config.slack)
    outcome = run_compare(config, conf, allow_caliber_mismatch=args.allow_caliber_mismatch)
    out = report(config, outcome, slack_client=client)
    print(out.text, end="")
    print(f"report: {out.markdown}\nslack:  {out.slack.status} ({out.slack.path})")
    if out.forge is not None:
        print(f"check:  {out.forge.check.conclusion} ({out.forge.check.name} on {outcome.plan.head_sha[:12]}): "
              f"{out.forge.status}" + (f": {out.forge.error}" if out.forge.error else ""))
    rows = [c for rows in outcome.comparisons.values() for c in rows]
    if any(c.verdict is Verdict.INCOMPARABLE for c in rows):
        return EXIT_CALIBER
    return EXIT_ERROR if outcome.errors and not rows and not any(outcome.head_results.values()) else EXIT_OK


def _forge_airflow_glue() -> tuple[object, object]:
    """``zlops forge serve --trigger airflow``: Airflow's DAG trigger and connections, or one line saying that
    Airflow is missing."""
    try:
        import airflow  # noqa: F401 - only to say at once, in one line, that it is missing
    except ImportError as exc:
        raise ConfigError(f"zlops forge serve --trigger airflow needs Airflow installed ({exc}); install the "
                          "airflow extra, or run --trigger local (zlops compare in this process)") from None
    from zlops.airflow.forge import connection_secrets, trigger_pr_compare

    return trigger_pr_compare, connection_secrets


def cmd_forge_serve(args: argparse.Namespace) -> int:
    from zlops.forge.receiver import serve

    # a service: its decisions and compares are logged at INFO whatever the terminal (docs/forge.md)
    logging.getLogger("zlops").setLevel(logging.DEBUG if args.verbose > 1 else logging.INFO)
    serve(str(found_config(args).path), host=args.host, port=args.port, trigger=args.trigger,
          airflow=_forge_airflow_glue)
    return EXIT_OK


def cmd_rescore(args: argparse.Namespace) -> int:
    from zlops.steps.rescore import rescore, show_lines

    if args.show:
        print("\n".join(show_lines(config_of(args), args.run_key)))
        return EXIT_OK
    result = rescore(config_of(args), args.run_key)
    print("\n".join(result.lines()))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="zlops", description="Nightly performance regressions for accelerator kernels.")
    p.add_argument("--version", action="version", version=f"zlops {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)")
    display = p.add_mutually_exclusive_group()
    display.add_argument("--progress", dest="interactive", action="store_const", const=True, default=None,
                         help="live progress display even when not on a terminal")
    display.add_argument("--plain", dest="interactive", action="store_const", const=False,
                         help="plain log lines instead of the live display")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="create the demo upstream and run a week of nightlies over it")
    d.add_argument("--home", default=DEMO_HOME, help=f"demo home (default: ./{DEMO_HOME})")
    d.add_argument("--rounds", type=positive(int), default=None, help="samples per benchmark process (default: 5)")
    d.add_argument("--workers", type=positive(int), default=None, help="fresh benchmark processes per run "
                   "(default: 1 paired, 5 nightly)")
    d.add_argument("--measure", choices=("paired", "nightly"), default="paired",
                   help="paired (default): each night measures its commit and its baseline commit in interleaved "
                        "fresh processes, so a shared host's load cancels (about twice the processes); nightly: "
                        "each commit alone against the stored baseline")
    d.add_argument("--judge", choices=("simple", "noise"), default="simple",
                   help="simple: the seed's 2%%/5%% rule (default; under a minute on a quiet machine); noise: the "
                        "production judge with "
                        "same-device A/B confirmation (a few minutes)")
    d.add_argument("--no-contention-gate", dest="contention_gate", action="store_false",
                   help="judge the nights even when other programs compete for the CPU (the gate is on by "
                        "default: a night measured on a busy host is reported invalid, with the figure)")
    d.epilog = ("exit codes: 0 the check passed; 1 the check failed (a scripted change missed, or an untouched "
                "operator moved beyond 5%); 2 bad usage; 5 could not measure: the host was too busy for the "
                "demo's budget (the summary names the figure and what to do)")
    d.set_defaults(func=cmd_demo)

    n = sub.add_parser("nightly", help="run the nightly for one or every suite of a config")
    n.add_argument("--config", help=CONFIG_HELP)
    n.add_argument("--suite", help="only this suite")
    n.add_argument("--sha", type=_commit_sha, help="measure this commit instead of the branch head (7 to 64 "
                                                  "lower-case hex characters)")
    n.add_argument("--run-id", type=_run_label,
                   help="run label; re-using one re-runs that run without duplicating rows, "
                        "ingesting the shards it already measured from their artifacts")
    n.add_argument("--replace", action="store_true",
                   help="re-measure a completed, accepted run (--run-id) and replace its results; "
                        "without it such a re-run is refused")
    n.add_argument("--fail-on", choices=("never", "potential", "regression"), default="never",
                   help="exit 3 when a case is flagged at this level")
    n.add_argument("--allow-caliber-mismatch", action="store_true",
                   help="judge series whose baseline was measured on another caliber (still printed as !!! [caliber])")
    n.add_argument("--promote", action="store_true",
                   help="accept the run as the baseline although its commit is older than the current baseline, "
                        "off the branch's first-parent line, or a caliber break (backfills); needs --suite")
    n.epilog = NIGHTLY_EXIT_HELP
    n.set_defaults(func=cmd_nightly)

    c = sub.add_parser("config", help="configuration tools")
    csub = c.add_subparsers(dest="config_command", required=True)
    cc = csub.add_parser("check", help="validate a config file")
    cc.add_argument("config", nargs="?", help=CONFIG_HELP)
    cc.set_defaults(func=cmd_config_check)

    db = sub.add_parser("db", help="database tools")
    dbsub = db.add_subparsers(dest="db_command", required=True)
    up = dbsub.add_parser("upgrade", help="migrate the store to the latest schema")
    up.add_argument("--config", help=CONFIG_HELP)
    up.set_defaults(func=cmd_db_upgrade)

    r = sub.add_parser("runs", help="list stored runs, newest first")
    r.add_argument("--config", help=CONFIG_HELP)
    r.add_argument("--suite")
    r.add_argument("--limit", type=positive(int), default=20)
    r.set_defaults(func=cmd_runs)

    cp = sub.add_parser("compare", help="compare a PR branch (or pull/N/head, or a SHA) with its merge-base on main")
    cp.add_argument("--config", help=CONFIG_HELP)
    cp.add_argument("--suite", required=True)
    cp.add_argument("--ref", required=True, help="branch name, pull/N/head or commit SHA")
    cp.add_argument("--devices", type=_int_list, help="device indices (default: idle devices are picked)")
    cp.add_argument("--pool", help="the suite's pool to run on (default: its first)")
    cp.add_argument("--rounds", type=int)
    cp.add_argument("--pairs", type=int, default=1, help="interleaved base/head pairs on one device")
    cp.add_argument("--variants", help="comma-separated variants (runtimes) of the suite")
    cp.add_argument("--allow-caliber-mismatch", action="store_true")
    cp.add_argument("--pr", type=int, help="the pull/merge request the suite's forge check answers on "
                    "(docs/forge.md; without it the check goes on the head commit only)")
    cp.set_defaults(func=cmd_compare)

    rs = sub.add_parser("rescore", help="re-judge a stored run from its artifacts with today's parsers and "
                                        "criteria (the previous verdicts stay in the archive)")
    rs.add_argument("run_key")
    rs.add_argument("--config", help=CONFIG_HELP)
    rs.add_argument("--show", action="store_true",
                    help="list the run's archived compare tables (when, why, verdict counts); changes nothing")
    rs.set_defaults(func=cmd_rescore)

    rep = sub.add_parser("report", help="re-render the report of a stored run from what was stored at it, into a new "
                                        "rerender-<n>/ folder (the original artifacts, alerts and Slack are untouched)")
    rep.add_argument("run_key")
    rep.add_argument("--config", help=CONFIG_HELP)
    rep.set_defaults(func=cmd_report)

    af = sub.add_parser("airflow", help="Airflow helpers")
    afsub = af.add_subparsers(dest="airflow_command", required=True)
    sp = afsub.add_parser("sync-pools", help="create one Airflow pool (1 slot) per configured device")
    sp.add_argument("--config", help=CONFIG_HELP)
    sp.add_argument("--dry-run", action="store_true", help="print the pools instead of creating them")
    sp.set_defaults(func=cmd_airflow_pools)

    dv = sub.add_parser("devices", help="list a backend's devices, which are idle, and the auto-picked range")
    dv.add_argument("--backend", help="cuda, musa, ascend, rocm, cpu or an alias (default: $ZL_BACKEND)")
    dv.add_argument("--json", action="store_true")
    dv.set_defaults(func=cmd_devices)

    tm = sub.add_parser("telemetry", help="sample device telemetry into a CSV and print its summary")
    tm.add_argument("--backend", help="cuda, musa, ascend, rocm, cpu or an alias (default: $ZL_BACKEND)")
    tm.add_argument("--devices", type=_device_list,
                    help="comma-separated indices (default: the backend's visibility variable, else every device)")
    tm.add_argument("--interval-ms", type=positive(int), default=1000, help="sampling interval (default 1000)")
    tm.add_argument("--duration-s", type=positive(float, zero=True), default=10.0,
                    help="how long to sample (default 10; Ctrl-C ends early)")
    tm.add_argument("--out", default="telemetry.csv", help="CSV to write (default ./telemetry.csv)")
    tm.set_defaults(func=cmd_telemetry)

    from zlops.formats import format_descriptions

    formats = format_descriptions()
    pa = sub.add_parser("parse", help="parse a results file and print the normalized rows",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="formats:\n" + "\n".join(f"  {name:<26}{desc}" for name, desc in formats.items()))
    pa.add_argument("--format", required=True, choices=sorted(formats), metavar="FORMAT",
                    help="the results format (listed below)")
    pa.add_argument("file")
    pa.add_argument("--json", action="store_true")
    pa.set_defaults(func=cmd_parse)

    bu = sub.add_parser("bundle", help="shard artifact bundles")
    busub = bu.add_subparsers(dest="bundle_command", required=True)
    bv = busub.add_parser("verify", help="check shard bundles (a bundle dir, or a run dir of <pool>/<device>/ bundles)")
    bv.add_argument("dirs", nargs="+", metavar="DIR")
    bv.add_argument("--json", action="store_true")
    bv.set_defaults(func=cmd_bundle_verify)

    ab = sub.add_parser("ab", help="A/B two runs' bundles: caliber check first, then case by case")
    ab.add_argument("a_dir", metavar="A_DIR", help="base side: a shard bundle or a run dir of <pool>/<device>/ bundles")
    ab.add_argument("b_dir", metavar="B_DIR", help="head side, likewise")
    ab.add_argument("--allow-caliber-mismatch", action="store_true",
                    help="compare although the calibers differ (what differs is still printed)")
    ab.add_argument("--allow-no-ir-diff", action="store_true",
                    help="measure cases whose fingerprinted artifacts are byte-identical on both sides "
                         "(also SWITCH_ALLOW_NO_IR_DIFF=1)")
    ab.add_argument("--fingerprint", action="append", metavar="GLOB",
                    help="build artifacts to fingerprint, relative to each bundle, e.g. '**/*.ttgir' (repeatable)")
    ab.add_argument("--metric", help="only this metric's rows (e.g. latency)")
    ab.add_argument("--json", action="store_true")
    ab.set_defaults(func=cmd_ab)

    fg = sub.add_parser("forge", help="the PR check's webhook receiver (docs/forge.md)")
    fgsub = fg.add_subparsers(dest="forge_command", required=True)
    fs = fgsub.add_parser("serve", help="serve POST /github and /gitlab (the forge's webhooks) with uvicorn")
    fs.add_argument("--config", help=CONFIG_HELP)
    fs.add_argument("--host", default="127.0.0.1")
    fs.add_argument("--port", type=positive(int), default=8795)
    fs.add_argument("--trigger", choices=("local", "airflow"), default="local",
                    help="who runs a compare a comment asks for: local (zlops compare in this process, one at a "
                         "time; no Airflow needed; the default) or airflow (a zlops_pr_compare DAG run)")
    fs.set_defaults(func=cmd_forge_serve)

    from zlops.cli.alerts import add_alert_parser  # zlops alert list|show|ack|expected|false-positive|wontfix

    add_alert_parser(sub)
    from zlops.cli.bisect import add_bisect_parser  # zlops bisect ALERT_ID

    add_bisect_parser(sub)
    st = sub.add_parser("store", help="the result store's health")
    stsub = st.add_subparsers(dest="store_command", required=True)
    stc = stsub.add_parser("check", help="check the store: SQLite PRAGMA integrity_check (read-only), PostgreSQL "
                                         "a connection; exit 1 with what to do when it is damaged")
    stc.add_argument("--config", help=CONFIG_HELP)
    stc.set_defaults(func=cmd_store_check)
    from zlops.cli.digest import add_digest_parser  # zlops digest: the weekly trust ledger

    add_digest_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    interactive = sys.stderr.isatty() if args.interactive is None else args.interactive
    args.interactive = interactive
    _setup_logging(args.verbose, interactive)
    try:
        return int(args.func(args))
    except CaliberMismatch as exc:
        _say(f"{exc}\nzlops: refused: the runs were measured on different calibers")
        return EXIT_CALIBER
    except (RunAlreadyAccepted, RunOwned) as exc:
        _say(f"zlops: refused: {exc}")
        return EXIT_USAGE
    except ConfigError as exc:
        _say(f"zlops: config error:\n{exc}")
        return EXIT_USAGE
    except ZlopsError as exc:
        _say(f"zlops: {exc}")
        if args.verbose:  # -v: the chain behind the one line (the driver's own error for a database fault)
            _say(traceback.format_exc())
        return EXIT_ERROR
    except KeyboardInterrupt:
        _say("zlops: interrupted")
        return 130
    except Interrupted as exc:
        _say(f"zlops: {exc}")
        return 128 + exc.signum
    except OSError as exc:  # a full disk, a folder zlops may not write: say which and where, no traceback
        _say(f"zlops: {os_error_line(exc)}" + ("" if args.verbose else "; -vv shows the traceback"))
        if args.verbose:
            _say(traceback.format_exc())
        return EXIT_ERROR


def _say(text: str) -> None:
    """One message on stderr, through zlops' one redaction rule (no URL credential, no token)."""
    print(redact_text(text).rstrip("\n"), file=sys.stderr)

if __name__ == "__main__":
    sys.exit(main())
