"""The result store's front door: :class:`Store`, one engine plus transaction-per-call conveniences.

Each convenience method is ONE transaction (commit on success, rollback on any exception). To
combine several writes atomically, open :meth:`Store.session` and call the session-level functions
of :mod:`zlops.store.runs`, :mod:`~zlops.store.series`, :mod:`~zlops.store.comparisons` and
:mod:`~zlops.store.outbox` with it: the caller owns that transaction.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from zlops.alerts.lifecycle import Alert, AlertState
from zlops.model import (
    BaselinePoint,
    CaseResult,
    Comparison,
    HistoryPoint,
    RunRecord,
    RunStatus,
    ShardOutcome,
    ShardStatus,
    Verdict,
)
from zlops.store import alerts as _alerts
from zlops.store import bisections as _bisections
from zlops.store import comparisons as _comparisons
from zlops.store import migrate, outbox, runs, series
from zlops.store.engine import CONNECT_TIMEOUT_S, SQLITE_BEGIN_OPTION, create_store_engine
from zlops.store.points import SeriesKey, SeriesPoint
from zlops.store.retry import RetryPolicy, as_unavailable, redacted_url, with_retries

if TYPE_CHECKING:
    import pandas as pd


def _frames() -> Any:
    # pandas is imported on first use only: `import zlops.store` stays light for DAG parsing and the CLI
    from zlops.store import frames

    return frames

T = TypeVar("T")

#: Key of the PostgreSQL advisory lock held while the outbox is flushed ("zlops" + 1).
OUTBOX_LOCK = 0x7A6C6F7074


class Store:
    """Benchmark runs, shard outcomes, results, comparisons and the notification outbox.

    Open with :meth:`open`; ``url`` is any SQLAlchemy URL of SQLite or PostgreSQL (psycopg 3).
    Every convenience method is one unit of work retried on transient database faults by ``retry``
    (:mod:`zlops.store.retry`); a fault that persists, or a permanent one, raises
    :class:`~zlops.errors.DatabaseUnavailable` with a one-line message.
    """

    url: str

    def __init__(self, url: str, engine: Engine, *, retry: RetryPolicy | None = None) -> None:
        self.url = url
        self.engine = engine
        self.retry = retry or RetryPolicy()
        # writers take SQLite's write lock at BEGIN (see zlops.store.engine); readers do not
        writer = engine.execution_options(**{SQLITE_BEGIN_OPTION: "BEGIN IMMEDIATE"})
        self._writes = sessionmaker(bind=writer, expire_on_commit=False)
        self._reads = sessionmaker(bind=engine, expire_on_commit=False)

    @classmethod
    def open(cls, url: str, *, migrate: bool = True, retry: RetryPolicy | None = None,
             connect_timeout_s: int = CONNECT_TIMEOUT_S, check: bool = True) -> Store:
        """Connect to ``url`` (a SQLite file's folder is created), check its health when ``check``
        (:mod:`zlops.store.health`: a damaged SQLite file raises StoreCorrupt before anything is
        written, an unreachable server DatabaseUnavailable) and, when ``migrate``, upgrade the
        schema to the newest revision (connects that fail at start-up are retried by ``retry``; a
        server that does not answer fails a connect after ``connect_timeout_s``)."""
        store = cls(url, create_store_engine(url, connect_timeout_s=connect_timeout_s), retry=retry)
        if check and migrate:  # before the first write; a store opened without migrating is not written here
            from zlops.store.health import check_store

            check_store(store)
        if migrate:
            store.upgrade()
        return store

    def __repr__(self) -> str:
        return f"Store({redacted_url(self.url)!r})"

    @property
    def display_url(self) -> str:
        """The URL with its password redacted (what messages and logs may show)."""
        return redacted_url(self.url)

    # -- schema and transactions -------------------------------------------------------------

    def upgrade(self) -> None:
        """Migrate the schema to head; safe to repeat, and to run from two processes at once."""
        self._retrying(lambda: migrate.upgrade(self.engine), "schema upgrade")

    def current_revision(self) -> str | None:
        """The schema revision of the database; None when it was never migrated."""
        return self._retrying(lambda: migrate.current_revision(self.engine), "schema check")

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction: committed when the block ends, rolled back when it raises.

        Not retried (the block is the caller's); a database fault raises DatabaseUnavailable. Use
        :meth:`unit_of_work` for a block that may simply be run again.
        """
        try:
            with self._writes.begin() as session:
                yield session
        except DBAPIError as exc:
            fault = as_unavailable(exc, self.url)
            if fault is None:
                raise
            raise fault from exc

    def unit_of_work(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(session, *args, **kwargs)`` in one write transaction, run again on a transient fault.

        ``fn`` must be safe to repeat (every zlops store write is an idempotent upsert).
        """
        def once() -> T:
            with self._writes.begin() as session:
                return fn(session, *args, **kwargs)

        return self._retrying(once, getattr(fn, "__name__", "store write"))

    def _retrying(self, fn: Callable[[], T], what: str) -> T:
        return with_retries(fn, url=self.url, policy=self.retry, what=what)

    def _write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self.unit_of_work(fn, *args, **kwargs)

    def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(session, *args, **kwargs)`` in one read transaction, run again on a transient fault: for
        the session-level reads of :mod:`zlops.store.pages` and friends."""
        return self._query(fn, *args, **kwargs)

    def _query(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def once() -> T:
            with self._reads.begin() as session:
                return fn(session, *args, **kwargs)

        return self._retrying(once, getattr(fn, "__name__", "store read"))

    @contextmanager
    def outbox_lock(self, *, timeout_s: float = 120.0) -> Iterator[bool]:
        """Held while the outbox is flushed, so two flushers (the report step, the outbox DAG, an
        ``alert ack``) never post the same message twice: a PostgreSQL advisory lock on its own
        connection; on SQLite an exclusive ``flock`` of the file ``<database>.outbox.lock``.

        Yields whether it was taken within ``timeout_s``: a flusher that did not get it leaves the
        messages to the one that holds it (or to the next flush) instead of waiting on.
        """
        deadline = time.monotonic() + timeout_s
        if self.engine.dialect.name == "postgresql":
            def take() -> Any:
                return self.engine.connect()

            conn = self._retrying(take, "outbox lock")
            try:
                got = False
                while True:
                    got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": OUTBOX_LOCK}).scalar())
                    conn.commit()
                    if got or time.monotonic() >= deadline:
                        break
                    time.sleep(0.2)
                yield got
            finally:
                try:
                    if got:
                        conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": OUTBOX_LOCK})
                        conn.commit()
                except DBAPIError:  # the connection died: the server released the lock with it
                    pass
                conn.close()
            return
        database = self.engine.url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            yield True
            return
        with open(Path(database + ".outbox.lock"), "a") as fh:
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.2)
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def dispose(self) -> None:
        """Close every pooled connection (the store can still be used; it reconnects)."""
        self.engine.dispose()

    # -- runs, shards, results ---------------------------------------------------------------

    def upsert_run(self, run: RunRecord) -> None:
        """Insert ``run`` or update it by ``run_key`` (first started_at kept, meta merged)."""
        self._write(runs.upsert_run, run)

    def get_run(self, run_key: str) -> RunRecord | None:
        return self._query(runs.get_run, run_key)

    def set_run_status(self, run_key: str, status: RunStatus, *,
                       finished_at: datetime | None = None) -> None:
        self._write(runs.set_run_status, run_key, status, finished_at=finished_at)

    def update_run_meta(self, run_key: str, values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the run's meta (top-level keys replaced)."""
        self._write(runs.update_run_meta, run_key, values)

    def set_accepted(self, run_key: str, accepted: bool = True) -> None:
        """Promote a run to baseline material (or demote it with ``accepted=False``)."""
        self._write(runs.set_accepted, run_key, accepted)

    def list_runs(self, *, suite: str | None = None, kind: str | None = None,
                  limit: int = 50) -> list[RunRecord]:
        """Runs, newest started first."""
        return self._query(runs.list_runs, suite=suite, kind=kind, limit=limit)

    def shard_statuses(self, run_keys: Sequence[str]) -> dict[str, list[ShardStatus]]:
        """The statuses of each of ``run_keys``' shards, in one read."""
        return self._query(runs.shard_statuses, list(run_keys))

    def accepted_runs(self, suite: str, *, kind: str = "nightly") -> list[RunRecord]:
        """Every accepted (baseline) run of a suite, newest started first."""
        return self._query(runs.accepted_runs, suite, kind=kind)

    def record_shard(self, run_key: str, outcome: ShardOutcome, results: Sequence[CaseResult] = (),
                     *, telemetry: Mapping[str, Any] | None = None,
                     identity: Mapping[str, Any] | None = None) -> None:
        """Store a shard and REPLACE its results, all or nothing (see :func:`runs.record_shard`)."""
        self._write(runs.record_shard, run_key, outcome, results, telemetry=telemetry,
                    identity=identity)

    def record_kernels(self, run_key: str, pool: str, device: int, inventory: Any) -> None:
        """Store a shard's kernel inventory (zlops.kernels), replacing the one it had; the shard is
        recorded first (:meth:`record_shard`)."""
        from zlops.store.kernels import save_inventory

        self._write(save_inventory, run_key, pool, device, inventory)

    def kernel_seed_shards(self, suite: str, pool: str, *, run_key: str) -> tuple[str, list[tuple[int, str]]] | None:
        """The earlier night whose shard caches seed ``run_key``'s on ``pool`` (zlops.store.kernels.seed_shards)."""
        from zlops.store.kernels import seed_shards

        return self._query(seed_shards, suite, pool, run_key=run_key)

    def pool_inventory(self, run_key: str, pool: str) -> Any:
        """A run's kernel inventories on one pool (zlops.store.kernels.PoolInventory), None for an unknown run."""
        from zlops.store.kernels import pool_inventory

        return self._query(pool_inventory, run_key, pool)

    def shards(self, run_key: str) -> list[ShardOutcome]:
        return self._query(runs.shards, run_key)

    def shard_extras(self, run_key: str) -> dict[tuple[str, int], dict[str, Any]]:
        return self._query(runs.shard_extras, run_key)

    def pool_identities(self, run_keys: Sequence[str]) -> list[tuple[str, datetime | None, str, dict[str, Any] | None]]:
        """(run_key, started_at, pool, identity of its first ok shard) of many runs, newest first, in bulk."""
        return self._query(runs.pool_identities, run_keys)

    def results(self, run_key: str) -> list[tuple[str, int, CaseResult]]:
        return self._query(runs.results, run_key)

    # -- series ------------------------------------------------------------------------------

    def baseline_candidates(self, suite: str, *, shas: Collection[str],
                            exclude_run_key: str | None = None, kind: str = "nightly",
                            window: int = series.BASELINE_WINDOW, only_runs: Collection[str] | None = None,
                            before: datetime | None = None,
                            ) -> list[tuple[str, str, str, BaselinePoint, datetime]]:
        """Each series' newest baseline point among the newest ``window`` accepted runs per pool at
        ``shas``, newest first; raw samples of those runs only (see :mod:`.series`)."""
        return self._query(series.baseline_candidates, suite, shas=shas,
                           exclude_run_key=exclude_run_key, kind=kind, window=window, only_runs=only_runs,
                           before=before)

    def compare_window(self, suite: str, *, ancestors: Collection[str], history_window: int,
                       baseline_window: int = series.BASELINE_WINDOW, keys: Collection[SeriesKey] = (),
                       exclude_run_key: str | None = None, kind: str = "nightly", before: datetime | None = None,
                       only_runs: Collection[str] | None = None) -> series.CompareWindow:
        """A night's history frame and every series' baseline (median and count) in one read transaction,
        a constant number of queries whatever the number of series (see :func:`.series.compare_window`)."""
        return self._query(series.compare_window, suite, ancestors=ancestors, history_window=history_window,
                           baseline_window=baseline_window, keys=keys, exclude_run_key=exclude_run_key, kind=kind,
                           before=before, only_runs=only_runs)

    # -- columnar reads (zlops.store.frames): a constant number of queries for any number of series --

    def history_frame(self, suite: str, *, ancestors: Collection[str], window: int,
                      exclude_run_key: str | None = None, pools: Collection[str] | None = None,
                      kind: str = "nightly", before: datetime | None = None,
                      only: Collection[tuple[str, str]] | None = None) -> pd.DataFrame:
        """The suite's history from the newest ``window`` accepted ancestor runs per pool, one row per
        series and run, oldest first per series; columns ``pool, case, metric, run_key, sha,
        finished_at, unit, lower_is_better, median, n, spread_pct`` (see :mod:`.frames`); ``only``
        keeps just those (case, metric) series."""
        return self._query(_frames().history_frame, suite, ancestors=ancestors, window=window,
                           exclude_run_key=exclude_run_key, pools=pools, kind=kind, before=before, only=only)

    def runs_frame(self, suite: str, runs: Sequence[Any], keys: Collection[SeriesKey] | None = None,
                   ) -> pd.DataFrame:
        """:meth:`history_frame`'s rows of exactly ``runs`` (``WindowRun`` values, e.g. a
        :class:`~.series.CompareWindow`'s), only the series of ``keys`` when given."""
        return self._query(_frames().runs_frame, suite, runs, keys)

    def verdict_frame(self, run_keys: Sequence[str], *,
                      verdicts: Collection[str | Verdict] | None = None) -> pd.DataFrame:
        """``run_key, pool, case, metric, verdict`` of the compare tables of ``run_keys`` (only the rows
        with one of ``verdicts`` when given)."""
        return self._query(_frames().verdict_frame, run_keys, verdicts=verdicts)

    def baseline_frame(self, suite: str, *, ancestors: Collection[str], window: int,
                       exclude_run_key: str | None = None, pools: Collection[str] | None = None,
                       kind: str = "nightly") -> pd.DataFrame:
        """Per pool its newest accepted ancestor run within the window: ``pool, run_key, sha, finished_at``."""
        return self._query(_frames().baseline_frame, suite, ancestors=ancestors, window=window,
                           exclude_run_key=exclude_run_key, pools=pools, kind=kind)

    def run_samples(self, run_key: str, pools: Collection[str] | None = None, *,
                    keys: Collection[SeriesKey] | None = None) -> dict[SeriesKey, tuple[float, ...]]:
        """The raw samples of ONE run per series (only ``keys`` when given), pooled over each pool's ok
        shards: where a rendering really needs samples (a trend's whiskers), not the compare table."""
        return self._query(_frames().run_samples, run_key, pools, keys)

    def save_series_points(self, run_key: str,
                           points: Mapping[SeriesKey, CaseResult] | Sequence[SeriesPoint | Mapping[str, Any]],
                           ) -> int:
        """Replace the run's pooled series points (``compare.pool_results`` output, SeriesPoint values or
        plain rows); returns how many were stored. Idempotent."""
        return self._write(series.save_series_points, run_key, points)

    def refresh_series_points(self, run_key: str) -> int:
        """Replace the run's series points with its stored results summarized again (a run whose results
        changed after its compare step, e.g. rescored; see :func:`.series.refresh_series_points`)."""
        return self._write(series.refresh_series_points, run_key)

    def series_history(self, suite: str, pool: str, case: str, metric: str, *, limit: int = 60,
                       kind: str = "nightly", include_run_key: str | None = None,
                       before: datetime | None = None) -> list[HistoryPoint]:
        """The newest ``limit`` accepted points of a series (of runs started before ``before``), oldest
        first (see :mod:`.series`)."""
        return self._query(series.series_history, suite, pool, case, metric, limit=limit,
                           kind=kind, include_run_key=include_run_key, before=before)

    def series_histories(self, suite: str, keys: Collection[SeriesKey], *, limit: int = 60,
                         kind: str = "nightly", include_run_key: str | None = None,
                         before: datetime | None = None, depth: int | None = None,
                         ) -> dict[SeriesKey, list[HistoryPoint]]:
        """:meth:`series_history` of many series in one read transaction, a constant number of queries
        whatever their number, looking back at most ``depth`` runs per pool (see :func:`.series.series_histories`)."""
        return self._query(series.series_histories, suite, keys, limit=limit, kind=kind,
                           include_run_key=include_run_key, before=before, depth=depth)

    def run_telemetry(self, run_keys: Sequence[str]) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
        """:meth:`shard_extras` of many runs at once (run_key -> (pool, device) -> telemetry, identity); a
        run without shards is absent. One query per 500 runs."""
        from zlops.store import pages  # pandas (through frames) on first use only

        return self._query(pages.run_telemetry, run_keys)

    # -- comparisons and notifications -------------------------------------------------------

    def save_comparisons(self, run_key: str, comparisons: Sequence[Comparison]) -> None:
        """Replace the run's compare table."""
        self._write(_comparisons.save_comparisons, run_key, comparisons)

    def comparisons(self, run_key: str) -> list[Comparison]:
        return self._query(_comparisons.comparisons, run_key)

    def caliber_comparisons(self, run_key: str, mark: str) -> list[Comparison]:
        """The run's compare rows a caliber check marked (INCOMPARABLE, or ``mark`` in the note)."""
        return self._query(_comparisons.caliber_rows, run_key, mark)

    def verdict_evidence(self, run_keys: Sequence[str], *, only_evidence: bool = False,
                         ) -> dict[tuple[str, str, str, str], tuple[Verdict, Any]]:
        """(run_key, pool, case, metric) -> (verdict, figures) of the runs' compare rows, in bulk."""
        return self._query(_comparisons.verdict_evidence, run_keys, only_evidence=only_evidence)

    def series_verdicts(self, run_keys: Sequence[str], pool: str, case: str, metric: str) -> dict[str, Verdict]:
        """What each run judged one series (to restart a series' reference after a confirmed change)."""
        return self._query(_comparisons.series_verdicts, run_keys, pool, case, metric)

    def archive_comparisons(self, run_key: str, *, reason: str) -> int:
        """Keep the current compare table beside the next one (rescore); returns the archive revision."""
        return self._write(_comparisons.archive_comparisons, run_key, reason=reason, when=datetime.now(timezone.utc))

    def archived_comparisons(self, run_key: str) -> list[tuple[int, datetime, str, list[Comparison]]]:
        return self._query(_comparisons.archived_comparisons, run_key)

    def queue_notification(self, run_key: str, kind: str, channel: str,
                           payload: Mapping[str, Any], *, parent_id: int | None = None) -> int:
        """Queue a message in the outbox (idempotent per run, kind, channel); returns its id.
        With ``parent_id`` it is a reply in that message's thread."""
        return self._write(outbox.queue_notification, run_key, kind, channel, payload, parent_id=parent_id)

    def mark_notification(self, notification_id: int, status: str, *, error: str | None = None,
                          ts: str | None = None, channel_id: str | None = None,
                          result: Mapping[str, Any] | None = None, attempted: bool = True) -> None:
        """Record a delivery attempt: ``status`` pending|sent|failed|abandoned; counts attempts."""
        self._write(outbox.mark_notification, notification_id, status, error=error, ts=ts,
                    channel_id=channel_id, result=result, attempted=attempted)

    def outbox_items(self, *, ids: list[int] | None = None, statuses: tuple[str, ...] = ("pending", "failed"),
                     run_key: str | None = None, kinds: tuple[str, ...] | None = None,
                     exclude_kinds: tuple[str, ...] = (), channel: str | None = None) -> list[outbox.OutboxItem]:
        """Messages still to deliver (or exactly ``ids``), oldest first, with their thread parents."""
        return self._query(outbox.outbox_items, ids=ids, statuses=statuses, run_key=run_key, kinds=kinds,
                           exclude_kinds=exclude_kinds, channel=channel)

    def known_channel_id(self, channel: str) -> str | None:
        return self._query(outbox.known_channel_id, channel)

    def pending_notifications(self, *, run_key: str | None = None) -> list[dict[str, Any]]:
        """Messages still to deliver (pending or failed), oldest first."""
        return self._query(outbox.pending_notifications, run_key=run_key)

    # -- alerts ------------------------------------------------------------------------------

    def alert(self, alert_id: int) -> Alert:
        """One alert; AlertError when there is none."""
        return self._query(_alerts.get_alert, alert_id)

    def alerts(self, *, suite: str | None = None, states: Collection[AlertState] | None = None,
               limit: int | None = 500) -> list[Alert]:
        """Alerts, newest first; ``states`` None means all; ``limit`` None: every one (what a count or a
        night's references need: a capped list would silently drop the oldest)."""
        return self._query(_alerts.list_alerts, suite=suite, states=states, limit=limit)

    def alerts_by_id(self, alert_ids: Collection[int]) -> dict[int, Alert]:
        """Many alerts at once (an unknown id is absent): one query per 500 ids."""
        return self._query(_alerts.alerts_by_id, alert_ids)

    def alert_events(self, alert_id: int) -> list[dict[str, Any]]:
        return self._query(_alerts.alert_events, alert_id)

    def set_alert_state(self, alert_id: int, state: AlertState, *, note: str = "",
                        actor: str = "someone") -> tuple[Alert, Alert, int]:
        """A person's change of an alert's state: (before, after, event id)."""
        return self._write(_alerts.set_alert_state, alert_id, state, note=note, actor=actor)

    def record_thread(self, notification_id: int, ts: str, channel_id: str | None) -> int:
        """Slack's ts and channel id of an alert announcement, kept on its alerts."""
        return self._write(_alerts.record_thread, notification_id, ts, channel_id)

    def run_alert_events(self, run_key: str) -> list[tuple[Alert, dict[str, Any]]]:
        """What the nightly did to alerts at ``run_key`` (opened, changed, worsened), in order."""
        return self._query(_alerts.run_events, run_key)

    # -- bisections ----------------------------------------------------------------------------

    def open_bisection(self, *, suite: str, pool: str, device: int, commits: Sequence[str],
                       targets: Sequence[Any], alert_ids: Sequence[int]) -> Any:
        """The bisection of this range and pool (made when new) with ``alert_ids`` linked (idempotent)."""
        return self._write(_bisections.open_bisection, suite=suite, pool=pool, device=device, commits=commits,
                           targets=targets, alert_ids=alert_ids)

    def bisection(self, bisection_id: int) -> Any:
        """One bisection (:class:`zlops.bisect.search.Bisection`), or None."""
        return self._query(_bisections.get_bisection, bisection_id)

    def bisection_of_alert(self, alert_id: int) -> Any:
        """The bisection an alert belongs to, or None."""
        return self._query(_bisections.bisection_of_alert, alert_id)

    def bisections_of_alerts(self, alert_ids: Collection[int]) -> dict[int, Any]:
        """alert id -> its bisection (:class:`zlops.bisect.search.Bisection`) for the alerts in one, in bulk."""
        return self._query(_bisections.bisections_of_alerts, alert_ids)

    def culprits_of_alerts(self, alert_ids: list[int]) -> dict[int, str]:
        """alert id -> the culprit sha a finished bisection found for it (one query)."""
        return self._query(_bisections.culprits_of_alerts, alert_ids)

    def bisection_steps(self, bisection_id: int) -> list[Any]:
        """The stored steps of a bisection (:class:`zlops.bisect.search.StepRecord`), in order."""
        return self._query(_bisections.steps, bisection_id)

    def save_bisection_step(self, bisection_id: int, step: Any) -> None:
        """Store a decided step (a step already stored is left as it is)."""
        self._write(_bisections.save_step, bisection_id, step)

    def set_bisection_state(self, bisection_id: int, state: Any, *, reason: str,
                            culprit: tuple[str, str, str] | None = None, candidates: Sequence[str] = ()) -> None:
        self._write(_bisections.set_state, bisection_id, state, reason=reason, culprit=culprit, candidates=candidates)

    def bisect_spent(self, pool: str, since: datetime) -> tuple[int, float]:
        """Builds and device seconds the bisections of ``pool`` spent since ``since``."""
        return self._query(_bisections.spent, pool, since)

    def culprits(self, suite: str) -> list[Any]:
        """The suite's bisections that named a culprit, newest first."""
        return self._query(_bisections.culprits, suite)

    def bisections_with_culprit(self, suite: str, sha: str) -> list[Any]:
        """The suite's bisections whose verified culprit is ``sha``, oldest first."""
        return self._query(_bisections.with_culprit, suite, sha)
