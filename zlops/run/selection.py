"""Which cases a run of a suite's command measures: the value of ``{cases}``.

A nightly runs every case. An A/B of tonight's suspects should run only the suspects' cases, or
it costs the whole suite per run (the issue-11 night: a 16-run A/B of every case for one
suspect, ~400 s of a ~435 s night). Two kinds of suite can select:

- a partitioned suite (``partition:``): its case names are the harness's own; ``{cases}`` is
  their comma-joined list and ``{cases_file}`` a file of them, one a line; empty = every case;
- a suite with ``select:``: each zlops case name maps to the harness's selection token (the
  ``token`` regex's group), the distinct tokens, in case order, are joined with ``join`` (FlagGems:
  ``abs/float16/(64x64)`` -> ``abs``, ``-m "abs or exp"``), and a run of every case passes
  ``every`` (pytest: ``-m ""`` selects everything).

:class:`zlops.run.runner.ShardSpec` carries the cases (``None`` = every case); :func:`selects_cases`
says whether a suite can take them at all. Pure functions, no I/O.
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Sequence

from zlops.config.settings import SelectConfig, SuiteConfig

log = logging.getLogger(__name__)


def selects_cases(suite: SuiteConfig) -> bool:
    """Whether the suite's command can run a subset of its cases (partitioned, or with ``select:``).
    A caller with a subset (an A/B) passes it only then; otherwise the run measures every case."""
    return suite.partition is not None or suite.select is not None


def selection_tokens(select: SelectConfig, cases: Sequence[str]) -> tuple[str, ...] | None:
    """The distinct selection tokens of ``cases``, in the order of their first case; ``None`` when a
    case has no token (the regex does not match it or its group is empty): such a case cannot be
    selected, so the caller must run every case rather than silently skip it."""
    pattern = re.compile(select.token)
    out: dict[str, None] = {}
    for case in cases:
        m = pattern.search(case)
        token = (m.group(1) if pattern.groups else m.group(0)) if m else None
        if not token:
            return None
        out.setdefault(token)
    return tuple(out)


def cases_value(suite: SuiteConfig, cases: Sequence[str] | None) -> str:
    """``{cases}`` for a run of ``cases`` (``None``: every case)."""
    if suite.select is None:
        return ",".join(cases or ())
    if not cases:
        return suite.select.every
    tokens = selection_tokens(suite.select, cases)
    if tokens is None:
        log.warning("select.token %r finds no token in every case of %s; running every case", suite.select.token,
                    list(cases))
        return suite.select.every
    return suite.select.join.join(tokens)


def selection_argv(suite: SuiteConfig, cases: Sequence[str] | None) -> list[str]:
    """The suite's command for a run of ``cases`` (``None``: every case) as a template: ``{cases}``
    filled, the runner's other placeholders (``{results}``, ``{device}``, ...) and ``{{``/``}}``
    escapes left as written, so :func:`zlops.run.runner.render_command` formats it once more with the
    shard's values and a brace inside a case name is never read as a placeholder.

    For FlagGems, ``[..., "-m", "abs or exp", ...]`` for suspects of two ops, ``[..., "-m", "", ...]``
    (or ``select.every``) for a nightly."""
    value = cases_value(suite, cases)
    out = []
    for arg in suite.command:
        parts = []
        for literal, name, _, _ in string.Formatter().parse(arg):
            parts.append(literal.replace("{", "{{").replace("}", "}}"))
            if name == "cases":
                parts.append(value.replace("{", "{{").replace("}", "}}"))
            elif name is not None:
                parts.append("{" + name + "}")
        out.append("".join(parts))
    return out


def selected_cases(suite: SuiteConfig, cases: Sequence[str], universe: Sequence[str]) -> list[str]:
    """The cases of ``universe`` (what a whole run measures) that a run of ``cases`` actually runs.

    A partitioned suite runs exactly ``cases``; a ``select:`` suite runs every case whose token one of
    ``cases`` has (FlagGems: ``-m mean`` runs every shape of mean, not only the suspect's), and every
    case when a token is missing. What an A/B run costs depends on this count, not on the suspects'.
    """
    if suite.select is None:
        wanted = set(cases)
        return [c for c in universe if c in wanted] or list(cases)
    tokens = selection_tokens(suite.select, cases)
    if tokens is None:
        return list(universe)
    pattern = re.compile(suite.select.token)
    keep = set(tokens)
    out = []
    for case in universe:
        m = pattern.search(case)
        token = (m.group(1) if pattern.groups else m.group(0)) if m else None
        if token in keep:
            out.append(case)
    return out or list(cases)
