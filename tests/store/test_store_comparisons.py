"""Compare tables: round-trip into model objects, replacement, refusal of bad tables."""

from __future__ import annotations

import dataclasses

import pytest

from zlops.errors import StoreError
from zlops.model import BaselinePoint, Comparison, Figures, Judgement, Summary, Verdict
from zlops.store import Store


def _cmp(make, case: str, verdict: Verdict, *, pool: str = "npu", base: bool = True,
         head: tuple[float, ...] | None = (10.5, 10.7), suite: str = "ops") -> Comparison:
    point = BaselinePoint.of_samples("n0", make.sha(9), "us", (10.0, 10.1, 9.9)) if base else None
    judged = verdict not in (Verdict.NEW, Verdict.MISSING)
    return Comparison(
        suite=suite, pool=pool, case=case, metric="latency", unit="us", lower_is_better=True,
        base=point, head=None if head is None else Summary.of(head),
        judgement=Judgement(verdict=verdict, change_pct=6.0 if judged else None,
                            worse_pct=6.0 if judged else None,
                            threshold_pct=5.0 if judged else None,
                            note=f"{case} note" if judged else ""))


def test_comparisons_round_trip(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    table = [
        _cmp(make, "z-regressed", Verdict.REGRESSION),
        _cmp(make, "a-new", Verdict.NEW, base=False),
        _cmp(make, "m-missing", Verdict.MISSING, head=None),
        _cmp(make, "z-regressed", Verdict.UNCHANGED, pool="cpu", head=(0.1 + 0.2,)),
    ]
    figured = _cmp(make, "f-figures", Verdict.SUSPECT)  # JSON through PostgreSQL's COPY and back
    table.append(dataclasses.replace(figured, judgement=dataclasses.replace(figured.judgement, figures=Figures(
        10.0, "median of 7 nights", 10.6, "tonight, 2 samples", unit="us", ci_pct=(1.0, 9.5), threshold_pct=2.0,
        modes=(9.9, 10.4), runs_base=(10.0, 10.1), runs_head=(10.5, 10.7)), note='a "quoted" \\ note\twith tab')))
    store.save_comparisons("n1", table)
    got = store.comparisons("n1")
    assert got == table                       # same values, same order as saved
    assert got[0].base_value == 10.0 and got[0].head_value == 10.6
    assert got[1].base is None and got[2].head is None
    assert got[3].head == Summary(0.30000000000000004, 1)
    assert got[0].base == BaselinePoint("n0", make.sha(9), "us", 10.0, 3) and got[0].head == Summary(10.6, 2)


def test_save_comparisons_replaces_the_table(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    store.upsert_run(make.run("n2"))
    store.save_comparisons("n1", [_cmp(make, "a", Verdict.REGRESSION),
                                  _cmp(make, "b", Verdict.IMPROVED)])
    store.save_comparisons("n2", [_cmp(make, "a", Verdict.NEW, base=False)])
    rescored = [_cmp(make, "b", Verdict.POTENTIAL)]
    store.save_comparisons("n1", rescored)
    store.save_comparisons("n1", rescored)
    assert store.comparisons("n1") == rescored
    assert [c.case for c in store.comparisons("n2")] == ["a"]
    store.save_comparisons("n1", [])
    assert store.comparisons("n1") == []


def test_bad_tables_are_refused_and_change_nothing(store: Store, make) -> None:
    store.upsert_run(make.run("n1"))
    kept = [_cmp(make, "a", Verdict.REGRESSION)]
    store.save_comparisons("n1", kept)
    with pytest.raises(StoreError, match="repeated"):
        store.save_comparisons("n1", [_cmp(make, "b", Verdict.NEW), _cmp(make, "b", Verdict.NEW)])
    with pytest.raises(StoreError, match="suite"):
        store.save_comparisons("n1", [_cmp(make, "b", Verdict.NEW, suite="elsewhere")])
    assert store.comparisons("n1") == kept
    with pytest.raises(StoreError, match="unknown run"):
        store.save_comparisons("nope", kept)
    with pytest.raises(StoreError, match="unknown run"):
        store.comparisons("nope")


def test_verdict_evidence_holds_level_changes_suspects_and_ab_runs(store: Store, make) -> None:
    """What the judge needs of a window of nights (issue 22): level changes, A/B runs, and the suspects,
    so that a run of unresolved suspect nights stays out of the history; plain verdicts are not read."""
    store.upsert_run(make.run("n1"))
    figured = _cmp(make, "ab", Verdict.UNCHANGED)
    figured = dataclasses.replace(figured, judgement=dataclasses.replace(figured.judgement, figures=Figures(
        10.0, "A/B base, 2 runs", 10.1, "A/B head, 2 runs", runs_base=(10.0, 10.1), runs_head=(10.1, 10.2))))
    store.save_comparisons("n1", [_cmp(make, "sev", Verdict.SEVERE), _cmp(make, "sus", Verdict.SUSPECT),
                                  _cmp(make, "imp", Verdict.SUSPECT_IMPROVED), _cmp(make, "same", Verdict.UNCHANGED),
                                  _cmp(make, "gap", Verdict.UNMEASURABLE), figured])
    # measured beside another series' A/B (Figures.seen_*): evidence of its A/B noise, read like A/B runs
    seen = _cmp(make, "seen", Verdict.UNCHANGED)
    seen = dataclasses.replace(seen, judgement=dataclasses.replace(seen.judgement, figures=Figures(
        10.0, "median of 7 nights", 10.1, "tonight, 1 sample", seen_base=(10.0, 10.1), seen_head=(10.1, 10.0))))
    store.upsert_run(make.run("n2"))
    store.save_comparisons("n2", [seen, _cmp(make, "same", Verdict.UNCHANGED)])
    got = store.verdict_evidence(["n1"], only_evidence=True)
    assert {k[2]: v[0] for k, v in got.items()} == {"sev": Verdict.SEVERE, "sus": Verdict.SUSPECT,
                                                   "imp": Verdict.SUSPECT_IMPROVED, "ab": Verdict.UNCHANGED}
    [(key, (verdict, figures))] = store.verdict_evidence(["n2"], only_evidence=True).items()
    assert key[2] == "seen" and figures.seen_head == (10.1, 10.0) and figures.seen_base == (10.0, 10.1)
