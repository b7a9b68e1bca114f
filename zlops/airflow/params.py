"""The zlops DAGs' trigger params: one place for each param's title, meaning and what it accepts, and
the sentence a refused value gets instead of jsonschema's dump.

Airflow validates a trigger's conf against each Param's JSON schema and answers a refusal with
``Invalid input for param sha: 'xyz' does not match '^[0-9a-f]{7,64}$'`` followed by the schema and
the instance, pretty-printed: the raw report of ``jsonschema``. :class:`TriggerParamErrors` (a root
middleware of the api-server, registered by the zlops plugin) rewrites that answer for the zlops DAGs
into one sentence per refusal, e.g. ``Commit (sha): expected a full or short commit SHA ... got 'xyz'``.
The same words are the Param's description in the trigger form, so the form says up front what the
refusal would say.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from zlops.host.gitops import COMMIT_SHA_ACCEPTS, COMMIT_SHA_PATTERN

#: the trigger form's pattern: the one SHA rule of zlops.host.gitops (``zlops nightly --sha`` checks the same)
SHA_PATTERN = COMMIT_SHA_PATTERN
#: the DAG ids whose trigger refusals are rewritten
DAG_PREFIX = "zlops_"


@dataclass(frozen=True)
class ParamText:
    """A trigger param in words: the form's title, what it does, and what values it accepts."""

    title: str
    meaning: str
    accepts: str  # may name schema keywords, e.g. {maximum}: filled from the Param's schema

    def accepted(self, schema: Any) -> str:
        try:
            return self.accepts.format(**schema) if isinstance(schema, dict) else self.accepts
        except (KeyError, IndexError, ValueError):
            return self.accepts

    def description(self, schema: dict[str, Any]) -> str:
        return f"{self.meaning} Accepts {self.accepted(schema)}."


PARAMS: dict[str, ParamText] = {
    "sha": ParamText("Commit", "Measure this commit of the branch instead of its head.",
                     f"{COMMIT_SHA_ACCEPTS} (empty: the branch head)"),
    "promote": ParamText("Promote to baseline", "Accept this run as the baseline although its commit is older than "
                         "the current baseline, off the branch's first-parent line, or a caliber break (backfills, an "
                         "intended driver or timer change).", "true or false"),
    "suite": ParamText("Suite", "The configured suite whose repository the ref belongs to.",
                       "one of the suites in the config"),
    "ref": ParamText("Ref", "What to compare with its merge-base on the suite's branch.",
                     "a branch name like feature/faster-softmax, pull/N/head, or a commit SHA (no spaces, ';', "
                     "'..', '@{{', '//' or leading '-')"),
    "devices": ParamText("Devices", "Device indices to run on.",
                         "a list of at most 8 device indices like [0, 1], each 0 or more (empty: idle devices are "
                         "picked)"),
    "rounds": ParamText("Rounds", "Samples per benchmark process.",
                        "an integer from {minimum} to {maximum} (empty: the suite's rounds)"),
    "pairs": ParamText("Interleaved pairs", "Base/HEAD pairs on one device (7 or more let the noise judge "
                       "confirm by A/B).", "an integer from {minimum} to {maximum}"),
    "variants": ParamText("Variants / runtimes", "Variants of the suite to run, one after another.",
                          'a list of the suite\'s variant names like ["a2a3"] (empty: every variant)'),
    "pool": ParamText("Pool", "The suite's pool to run on.", "the name of one of the suite's pools (empty: its "
                      "first pool)"),
    "pr": ParamText("Pull request", "The pull (merge) request the check answers on (set by the forge trigger, "
                    "zlops.forge).", "a number from 1 to {maximum} (empty: the check goes on the commit only)"),
}


def param(name: str, default: Any, **schema: Any) -> Any:
    """The Airflow Param ``name`` with its title and description from :data:`PARAMS` and ``schema``."""
    from airflow.sdk import Param

    text = PARAMS[name]
    return Param(default, title=text.title, description=text.description(schema), **schema)


def nightly_params() -> dict[str, Any]:
    """The nightly DAGs' trigger form: ``sha`` and ``promote``."""
    return {"sha": param("sha", None, type=["null", "string"], pattern=SHA_PATTERN),
            "promote": param("promote", False, type="boolean")}


def pr_compare_params(suites: list[str]) -> dict[str, Any]:
    """The ``zlops_pr_compare`` trigger form (the repository always comes from the config)."""
    from zlops.forge.prcompare import MAX_PAIRS, MAX_PR, MAX_ROUNDS, REF_PATTERN

    return {
        "suite": param("suite", suites[0], type="string", enum=suites),
        "ref": param("ref", "main", type="string", pattern=REF_PATTERN, minLength=1, maxLength=200),
        "devices": param("devices", None, type=["null", "array"], items={"type": "integer", "minimum": 0},
                         maxItems=8),
        "rounds": param("rounds", None, type=["null", "integer"], minimum=1, maximum=MAX_ROUNDS),
        "pairs": param("pairs", 1, type="integer", minimum=1, maximum=MAX_PAIRS),
        "variants": param("variants", None, type=["null", "array"], items={"type": "string"}),
        "pool": param("pool", None, type=["null", "string"]),
        "pr": param("pr", None, type=["null", "integer"], minimum=1, maximum=MAX_PR),
    }


_REFUSAL = re.compile(r"Invalid input for param (?P<name>[^:\s]+): (?P<message>[^\n]*)\n\n"
                      r"Failed validating '(?P<keyword>\w+)' in schema[^:\n]*:\n(?P<schema>.*?)\n\n"
                      r"On instance(?P<index>(?:\[[^\]\n]*\])*):\n(?P<instance>.*)\Z", re.DOTALL)


def _literal(block: str) -> Any:
    try:
        return ast.literal_eval(textwrap.dedent(block).strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return textwrap.dedent(block).strip()


def _show(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = json.dumps(value) if isinstance(value, (list, dict)) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def plain_refusal(text: str) -> str | None:
    """The sentence for Airflow's refusal of a trigger param (``Invalid input for param ...`` with
    jsonschema's report), or None when ``text`` is not such a refusal."""
    found = _REFUSAL.match(text.strip())
    if found is None:
        return None
    name, keyword, index = found["name"], found["keyword"], found["index"]
    schema, value = _literal(found["schema"]), _literal(found["instance"])
    known = PARAMS.get(name)
    title = known.title if known is not None else (schema.get("title") if isinstance(schema, dict) else None)
    accepts = known.accepted(schema) if known is not None else found["message"]
    if keyword == "enum" and isinstance(schema, dict) and isinstance(schema.get("enum"), list):
        accepts = "one of " + ", ".join(repr(v) for v in schema["enum"])
    where = f"{title} ({name})" if title else name
    item = f" (item {index.strip('[]')} is {_show(value)})" if index else ""
    got = "" if index else f", got {_show(value)}"
    return f"{where}: expected {accepts}{got}{item}."


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
_TRIGGER = re.compile(r"^/api/v2/dags/(?P<dag>[^/]+)/dagRuns/?$")


class TriggerParamErrors:
    """ASGI middleware: a 400 answer to a zlops DAG's trigger whose ``detail`` is Airflow's param
    refusal gets the plain sentence of :func:`plain_refusal` as its ``detail`` instead. Every other
    request and answer passes through untouched."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _TRIGGER.match(str(scope.get("path", ""))) if scope.get("type") == "http" else None
        if scope.get("method") != "POST" or path is None or not path["dag"].startswith(DAG_PREFIX):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                if message["status"] != 400:
                    await send(message)
                    return
                start = message
                return
            if start is None:
                await send(message)
                return
            body.append(message.get("body", b""))
            if not message.get("more_body", False):
                await _send_rewritten(send, start, b"".join(body))

        await self.app(scope, receive, capture)


async def _send_rewritten(send: Send, start: Message, body: bytes) -> None:
    try:
        doc = json.loads(body)
        sentence = plain_refusal(doc["detail"]) if isinstance(doc, dict) and isinstance(doc.get("detail"), str) \
            else None
    except ValueError:
        sentence = None
    if sentence is not None:
        body = json.dumps({**doc, "detail": sentence}).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        start = {**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
    await send(start)
    await send({"type": "http.response.body", "body": body, "more_body": False})
