"""The webhook receiver as a FastAPI app: ``POST /github`` and ``POST /gitlab`` (zlops.forge.webhook).

The zlops Airflow plugin mounts it at ``/zlops-forge`` of the api-server with Airflow's connections and
DAG trigger (zlops.airflow.forge); ``zlops forge serve`` runs it alone with uvicorn, secrets from the
environment, triggering through a callable given here (tests) or Airflow's API client. The routes
are public on purpose: the forge cannot log in to Airflow; the signature is the authentication.
"""

# no ``from __future__ import annotations``: FastAPI reads the routes' annotations (Request, imported in
# create_app so that zlops imports without FastAPI) when the routes are declared

from collections.abc import Callable
from typing import Any

from zlops.config.settings import Config
from zlops.forge.deliver import SecretSource, env_secrets
from zlops.forge.webhook import MAX_BODY, Answer, Receiver, TriggerFn


def create_app(config: Callable[[], Config], *, trigger: TriggerFn, secrets: SecretSource = env_secrets) -> Any:
    """The receiver app; ``config`` is called per delivery (a changed config needs no restart)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    receiver = Receiver(config, trigger=trigger, secrets=secrets)
    app = FastAPI(title="zlops forge webhooks", openapi_url=None, docs_url=None, redoc_url=None)

    async def deliver(kind: str, request: Request) -> JSONResponse:
        size = int(request.headers.get("content-length") or 0)
        if size > MAX_BODY:
            answer = Answer(413, f"refused: the delivery is larger than {MAX_BODY // 1048576} MiB")
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


def local_trigger(config_path: str) -> TriggerFn:
    """A trigger for the standalone receiver without Airflow: ``zlops compare`` in this process, one
    compare at a time, in a background thread (the answer does not wait for it). Where Airflow is
    installed ``zlops forge serve`` passes Airflow's trigger instead (:func:`serve`'s ``trigger``)."""
    import threading
    import uuid

    from zlops.config.settings import load_config

    lock = threading.Lock()

    def run(conf: dict, label: str) -> None:
        from zlops.forge.prcompare import report, run_compare
        from zlops.slack.outbox import client_for

        with lock:
            config = load_config(config_path)
            outcome = run_compare(config, conf, label=label)
            report(config, outcome, slack_client=client_for(config.slack))

    def trigger(conf: dict) -> str:
        label = f"forge-{uuid.uuid4().hex[:12]}"
        threading.Thread(target=run, args=(dict(conf), label), name=f"zlops-compare-{label}", daemon=True).start()
        return label

    return trigger


def serve(config_path: str, *, host: str = "127.0.0.1", port: int = 8795, trigger: TriggerFn | None = None) -> None:
    """``zlops forge serve``: the receiver alone under uvicorn, secrets from the environment; ``trigger``
    starts a compare (default :func:`local_trigger`: in this process)."""
    import uvicorn

    from zlops.config.settings import load_config

    load_config(config_path)   # a config error stops it here, in one line, not at the first delivery
    app = create_app(lambda: load_config(config_path), trigger=trigger or local_trigger(config_path))
    uvicorn.run(app, host=host, port=port, log_level="info")
