"""The webhook receiver as a FastAPI app: ``POST /github`` and ``POST /gitlab`` (zlops.forge.webhook).

The zlops Airflow plugin mounts it at ``/zlops-forge`` of the api-server with Airflow's connections and
DAG trigger (zlops.airflow.forge); ``zlops forge serve`` runs it alone with uvicorn (the ``forge`` extra:
FastAPI and uvicorn, no Airflow), secrets from the environment, and a trigger chosen explicitly:
``local`` (:func:`local_trigger`: ``zlops compare`` in this process) or ``airflow`` (a ``zlops_pr_compare``
run through Airflow's API client). The routes are public on purpose: the forge cannot log in to Airflow;
the signature is the authentication.
"""

# no ``from __future__ import annotations``: FastAPI reads the routes' annotations (Request, imported in
# create_app so that zlops imports without FastAPI) when the routes are declared

import logging
import threading
from collections.abc import Callable
from typing import Any

from zlops.config.settings import Config
from zlops.forge.deliver import SecretSource, env_secrets
from zlops.forge.guard import decision_line
from zlops.forge.lifecycle import AIRFLOW, LOCAL, finishing, settle
from zlops.forge.webhook import MAX_BODY, Answer, Receiver, TriggerFn

log = logging.getLogger(__name__)

#: ``zlops forge serve --trigger``: who runs the compare a comment asks for
TRIGGERS = (LOCAL, AIRFLOW)
#: how often the standalone receiver closes the checks left running past their deadline
SWEEP_EVERY_S = 60.0


def create_app(config: Callable[[], Config], *, trigger: TriggerFn, secrets: SecretSource = env_secrets,
               runner: str = LOCAL) -> Any:
    """The receiver app; ``config`` is called per delivery (a changed config needs no restart); ``runner`` says
    who runs the compares ``trigger`` starts (zlops.forge.lifecycle)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    receiver = Receiver(config, trigger=trigger, secrets=secrets, runner=runner)
    app = FastAPI(title="zlops forge webhooks", openapi_url=None, docs_url=None, redoc_url=None)

    async def deliver(kind: str, request: Request) -> JSONResponse:
        size = int(request.headers.get("content-length") or 0)
        if size > MAX_BODY:
            answer = Answer(413, f"refused: the delivery is larger than {MAX_BODY // 1048576} MiB")
            log.warning("forge delivery %s", decision_line(forge=kind, decision=answer.decision, status=413,
                                                           outcome=answer.message))
        else:
            body = await request.body()
            # the forge calls and the trigger block: off the event loop
            answer = await run_in_threadpool(receiver.handle, kind, dict(request.headers), body)
        return JSONResponse(answer.body(), status_code=answer.status)

    @app.get("/")
    def index() -> dict[str, str]:
        return {"message": "zlops forge webhook receiver: POST GitHub deliveries to github, GitLab's to gitlab"}

    @app.post("/github")
    async def github(request: Request) -> JSONResponse:
        return await deliver("github", request)

    @app.post("/gitlab")
    async def gitlab(request: Request) -> JSONResponse:
        return await deliver("gitlab", request)

    return app


def local_trigger(config_path: str, *, secrets: SecretSource = env_secrets) -> TriggerFn:
    """A trigger for the standalone receiver without Airflow: ``zlops compare`` in this process, one compare at a
    time, in a background thread (the answer does not wait for it), under the run id the receiver chose. Each
    compare logs its start, its conclusion and its check's post; one that raises closes its check neutral with the
    reason (:func:`zlops.forge.lifecycle.finishing`) and logs the traceback once."""
    from zlops.config.settings import load_config

    lock = threading.Lock()

    def run(conf: dict, label: str) -> None:
        from zlops.forge.prcompare import report, run_compare
        from zlops.slack.outbox import client_for
        from zlops.steps.context import open_store

        fields = {"compare": label, "suite": conf.get("suite"), "ref": conf.get("ref"), "pr": conf.get("pr")}
        try:
            config = load_config(config_path)
            store = open_store(config)
        except Exception:  # nothing to close it with: the next start's sweep, or its deadline, closes it
            log.exception("PR compare %s: the config or the store cannot be read", label)
            return
        try:
            with finishing(store, config, secrets, label), lock:
                log.info("PR compare %s", decision_line(**fields, state="started"))
                outcome = run_compare(config, conf, label=label)
                out = report(config, outcome, slack_client=client_for(config.slack), forge_secrets=secrets,
                             forge_run=label)
                check = out.forge
                log.info("PR compare %s", decision_line(
                    **fields, state="finished", mode=outcome.plan.mode, head=outcome.plan.head_sha[:12],
                    conclusion=check.check.conclusion if check else None, check=check.status if check else None,
                    error=check.error if check else None, report=str(out.markdown)))
        except Exception:  # its check is closed (finishing); the thread must not die unheard
            log.exception("PR compare %s crashed; its check was closed neutral with the reason", label)

    def trigger(conf: dict, run_id: str) -> str:
        waiting = "a compare runs; this one waits for it" if lock.locked() else "starting"
        log.info("PR compare %s", decision_line(compare=run_id, suite=conf.get("suite"), ref=conf.get("ref"),
                                                pr=conf.get("pr"), state="queued", note=waiting))
        threading.Thread(target=run, args=(dict(conf), run_id), name=f"zlops-compare-{run_id}", daemon=True).start()
        return run_id

    return trigger


def serve(config_path: str, *, host: str = "127.0.0.1", port: int = 8795, trigger: str = LOCAL,
          airflow: Callable[[], tuple[TriggerFn, SecretSource]] | None = None) -> None:
    """``zlops forge serve``: the receiver alone under uvicorn. ``trigger``: ``local`` (the compare in this
    process, secrets from the environment) or ``airflow`` (a ``zlops_pr_compare`` run; Airflow's connections:
    ``airflow()`` gives that trigger and secret source, the Airflow glue's, which this layer does not import).
    Its first log line says which. At start, the checks a previous life of this receiver left running are
    closed (neutral: it restarted), and every minute those past their deadline."""
    from zlops.config.settings import load_config
    from zlops.errors import ConfigError
    from zlops.steps.context import open_store

    if trigger not in TRIGGERS:
        raise ConfigError(f"zlops forge serve --trigger: expected one of {', '.join(TRIGGERS)}, got {trigger!r}")
    try:
        import uvicorn
    except ImportError as exc:
        raise ConfigError(f"zlops forge serve needs FastAPI and uvicorn ({exc}): install the forge extra, "
                          "e.g. bash scripts/bootstrap.sh forge") from None
    config = load_config(config_path)   # a config error stops it here, in one line, not at the first delivery
    if trigger == AIRFLOW and airflow is None:
        raise ConfigError("zlops forge serve --trigger airflow: no Airflow glue was given")
    how = ("airflow (each compare is a zlops_pr_compare DAG run; secrets from Airflow connections, else env)"
           if trigger == AIRFLOW else
           "local (zlops compare in this process, one at a time; secrets from the environment)")
    forges = sorted({f"{s.forge.kind}:{s.forge.repo}" for s in config.suites.values() if s.forge is not None})
    # the first line, before Airflow (when chosen) is imported and speaks
    log.info("zlops forge serve: trigger %s; listening on http://%s:%d (POST /github, /gitlab); config %s; "
             "forges %s", how, host, port, config_path, ", ".join(forges) or "none (every delivery is refused 404)")
    if trigger == AIRFLOW:
        assert airflow is not None
        fire, secrets = airflow()
    else:
        fire, secrets = local_trigger(config_path), env_secrets
    store = open_store(config)
    restarted = settle(store, config, secrets, restarted=LOCAL if trigger == LOCAL else None)
    if restarted.closed or restarted.failed:
        log.info("zlops forge serve: %s", restarted.line())
    stop = threading.Event()

    def sweep() -> None:
        while not stop.wait(SWEEP_EVERY_S):
            try:
                now_config = load_config(config_path)
                settle(open_store(now_config), now_config, secrets)
            except Exception as exc:  # noqa: BLE001 - a sweep that failed is tried again next minute
                log.warning("zlops forge serve: the sweep of checks left running failed: %s", exc)

    threading.Thread(target=sweep, name="zlops-forge-sweep", daemon=True).start()
    app = create_app(lambda: load_config(config_path), trigger=fire, secrets=secrets, runner=trigger)
    try:
        uvicorn.run(app, host=host, port=port, log_level="info")
    finally:
        stop.set()
