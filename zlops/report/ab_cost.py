"""What each pool's A/B cost tonight against what it was estimated to cost (run meta ``ab``), in one place.

The confirm step (:mod:`zlops.judge.confirm`) stores per pool: the budget and the rule that set it, the cost
model (start-up + per-case seconds, :mod:`zlops.judge.interleave`), the estimate of one run made before the
first one ran, the realised seconds, the runs and pairs, why it stopped, busy pairs re-run and the
three outcomes. Every rendering (report, run page) prints these lines; none computes its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def ab_cost_line(pool: str, entry: Mapping[str, Any]) -> str:
    """One pool's A/B in a sentence: runs, realised vs estimated seconds, budget, outcomes, why it stopped."""
    if "error" in entry:
        return f"{pool}: the A/B failed, its suspects stay suspects: {entry['error']}"
    unit = "device-s" if entry.get("unit") == "device-seconds" else "s"
    runs = int(entry.get("runs") or 0)
    seconds, budget = _num(entry.get("seconds")) or 0.0, _num(entry.get("budget_s"))
    est_run, real_run = _num(entry.get("est_run_s")), _num(entry.get("realised_run_s"))
    parts = [f"{pool}: {runs} runs"]
    shared = bool(entry.get("shared_head"))
    if entry.get("pairs") is not None:
        parts[0] += f" ({entry['pairs']} {'rounds' if shared else 'pairs'})"
    if runs:
        cost = f"{seconds:.0f} {unit} spent"
        if est_run is not None:
            est_total = _num(entry.get("est_s")) or est_run * runs
            off = (seconds / est_total - 1.0) * 100.0 if est_total else None
            cost += f", estimated {est_total:.0f} {unit} ({est_run:.1f} a run"
            cost += f"; realised {real_run:.1f} a run" if real_run is not None else ""
            cost += f", {off:+.0f}%)" if off is not None else ")"
        parts.append(cost)
    if budget is not None:
        basis = f" ({entry['budget_basis']})" if entry.get("budget_basis") else ""
        parts.append(f"budget {budget:.0f} {unit}{basis}")
    outcomes = entry.get("outcomes")
    if isinstance(outcomes, Mapping) and outcomes:
        order = {"confirmed": 0, "cleared": 1, "inconclusive": 2}
        parts.append(", ".join(f"{n} {k}" for k, n in sorted(outcomes.items(), key=lambda kv: (order.get(kv[0], 3),
                                                                                               kv[0]))))
    if entry.get("suspects") is not None:
        parts.append(f"{entry.get('ab_suspects', 0)} of {entry['suspects']} suspects in the A/B")
    if entry.get("discarded"):
        parts.append(f"{len(entry['discarded'])} busy pair(s) discarded and run again")
    groups = [g for g in entry.get("groups") or () if isinstance(g, Mapping)]
    head = entry.get("head")
    if shared and isinstance(head, Mapping):   # one A/B against several bases (zlops.judge.confirm.confirm_bases)
        each = [f"base {str(g.get('base', '?'))[:7]} {int(g.get('runs') or 0)} runs, "
                f"{_num(g.get('seconds')) or 0.0:.0f} {unit}" + (f" ({g['stopped']})" if g.get("stopped") else "")
                for g in groups]
        parts.append(f"one A/B against {len(groups)} bases, the head run once a round ({int(head.get('runs') or 0)} "
                     f"runs, {_num(head.get('seconds')) or 0.0:.0f} {unit}): " + ", ".join(each))
    elif len(groups) > 1:   # one A/B per baseline commit, sharing the pool's budget (zlops.judge.confirm.pool_entry)
        each = [f"base {str(g.get('base', '?'))[:7]} " + (f"failed: {g['error']}" if "error" in g else
                f"{int(g.get('runs') or 0)} runs, {_num(g.get('seconds')) or 0.0:.0f} {unit}")
                for g in groups]
        parts.append(f"{len(groups)} A/Bs against different bases, one budget: " + ", ".join(each))
    if entry.get("stopped"):
        parts.append(f"stopped: {entry['stopped']}")
    if entry.get("est_basis"):
        parts.append(f"estimate: {entry['est_basis']}")
    model = entry.get("cost_model")
    if isinstance(model, Mapping) and _num(model.get("fixed_s")) is not None:
        parts.append(f"cost model {model['fixed_s']:.1f} s start-up + {model.get('per_case_s', 0):.3f} s a case "
                     f"({model.get('basis', '')})")
    return "; ".join(parts)


def ab_cost_lines(meta: Mapping[str, Any] | None) -> list[str]:
    """Every pool's :func:`ab_cost_line`, by pool name; nothing when no A/B ran or was considered."""
    ab = (meta or {}).get("ab")
    if not isinstance(ab, Mapping):
        return []
    return [ab_cost_line(pool, entry) for pool, entry in sorted(ab.items()) if isinstance(entry, Mapping)]


def ab_section(meta: Mapping[str, Any] | None) -> list[str]:
    """The report's "A/B confirmation" section (markdown lines)."""
    lines = ab_cost_lines(meta)
    if not lines:
        return []
    return ["## A/B confirmation", "", *(f"- {line}" for line in lines), ""]
