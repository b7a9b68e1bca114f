"""SQLAlchemy 2.0 typed table models of the result store.

Portable between SQLite and PostgreSQL: plain ``JSON``, timezone-aware timestamps stored as UTC,
enumerations as short strings (validated by the model layer, so a new verdict needs no DDL).
Every constraint and index carries an explicit name (the naming convention below) so the hand-written
migrations in ``sql/versions/`` can match the models exactly; ``tests/store`` checks that they do.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: Values of ``notifications.status``; the outbox moves pending -> sent | failed (failed retries), or
#: abandoned when a message can never be sent (its files are gone, it is stale, its thread was abandoned).
NOTIFICATION_STATUSES = ("pending", "sent", "failed", "abandoned")
#: Values of ``alerts.state`` (see :class:`zlops.alerts.lifecycle.AlertState`).
ALERT_STATES = ("new", "confirmed", "acked", "expected", "false_positive", "fixed", "wontfix", "cleared")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware timestamp that is always stored and returned in UTC.

    SQLite has no timezone-aware type (it keeps the wall-clock text), so values are converted to UTC
    before binding and re-tagged as UTC when read. Naive datetimes are taken to be UTC already.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return to_utc(value)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return to_utc(value)


def to_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime; a naive value is interpreted as UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Run(Base):
    """One run of a suite at one commit; ``run_key`` is the idempotency key."""

    __tablename__ = "runs"
    __table_args__ = (
        Index(None, "suite", "kind", "started_at"),
        # history and baseline reads: the accepted runs of a suite, newest finished first
        Index(None, "suite", "kind", "accepted", "finished_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_key: Mapped[str] = mapped_column(String(250), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    suite: Mapped[str] = mapped_column(String(200))
    sha: Mapped[str] = mapped_column(String(64))
    branch: Mapped[str] = mapped_column(String(250))
    status: Mapped[str] = mapped_column(String(16))
    accepted: Mapped[bool] = mapped_column(Boolean)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON)


class Shard(Base):
    """One benchmark process on one device of one pool, within a run."""

    __tablename__ = "shards"
    __table_args__ = (UniqueConstraint("run_id", "pool", "device"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    pool: Mapped[str] = mapped_column(String(100))
    device: Mapped[int] = mapped_column(Integer)
    backend: Mapped[str] = mapped_column(String(50))
    status: Mapped[str] = mapped_column(String(16))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    artifact_dir: Mapped[str] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    results_file: Mapped[str | None] = mapped_column(Text)
    telemetry: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    identity: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))


class Result(Base):
    """One (case, metric) series point of one shard, with its raw samples.

    ``median``, ``n`` and ``spread_pct`` (1.4826 * MAD of the log samples in percent, None for fewer
    than two samples; :mod:`zlops.store.points`) are written at ingest from ``samples`` so reads and
    report SQL need not parse JSON.
    """

    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint("shard_id", "case", "metric"),
        # series lookups (history, baselines) filter on case + metric first
        Index(None, "case", "metric"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    shard_id: Mapped[int] = mapped_column(ForeignKey("shards.id", ondelete="CASCADE"))
    case: Mapped[str] = mapped_column(String(500))
    metric: Mapped[str] = mapped_column(String(100))
    unit: Mapped[str] = mapped_column(String(32))
    lower_is_better: Mapped[bool] = mapped_column(Boolean)
    median: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)
    samples: Mapped[list[float]] = mapped_column(JSON)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    spread_pct: Mapped[float | None] = mapped_column(Float)


class SeriesRow(Base):
    """One series of a suite: (pool, case, metric) in one unit and direction.

    The dimension of ``series_points``: a night's point stores only numbers and this id, so a history
    read moves numbers, not the same strings once a night. A series whose unit or direction changes is
    a new row (its points are not comparable with the old ones).
    """

    __tablename__ = "series"
    __table_args__ = (UniqueConstraint("suite", "pool", "case", "metric", "unit", "lower_is_better"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200))
    pool: Mapped[str] = mapped_column(String(100))
    case: Mapped[str] = mapped_column(String(500))
    metric: Mapped[str] = mapped_column(String(100))
    unit: Mapped[str] = mapped_column(String(32))
    lower_is_better: Mapped[bool] = mapped_column(Boolean)


class SeriesPointRow(Base):
    """One series of one run, its samples pooled over the pool's devices (``compare.pool_results``).

    Written by the compare step for its run (replaced wholesale, so a retry or a rescore leaves one
    row per series) and dropped for a pool whenever one of its shards is re-recorded; the history
    reads (:mod:`zlops.store.frames`) use these rows and never parse raw samples. The primary key
    (run, series) serves the by-run reads.
    """

    __tablename__ = "series_points"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"), primary_key=True)
    median: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)
    spread_pct: Mapped[float | None] = mapped_column(Float)


class ComparisonRow(Base):
    """One row of a run's compare table (a series against its baseline, and the verdict).

    Each side is kept as its median and sample count; what a verdict compared is in ``figures``.
    """

    __tablename__ = "comparisons"
    __table_args__ = (
        UniqueConstraint("run_id", "pool", "case", "metric"),
        # verdict_frame(run_keys, verdicts=level changes): the few such rows of the window's runs
        Index(None, "run_id", "verdict"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    pool: Mapped[str] = mapped_column(String(100))
    case: Mapped[str] = mapped_column(String(500))
    metric: Mapped[str] = mapped_column(String(100))
    unit: Mapped[str] = mapped_column(String(32))
    lower_is_better: Mapped[bool] = mapped_column(Boolean)
    base_run_key: Mapped[str | None] = mapped_column(String(250))
    base_sha: Mapped[str | None] = mapped_column(String(64))
    # each side's median and sample count (the raw samples stay in ``results``, by run: migration 0009)
    base_median: Mapped[float | None] = mapped_column(Float)
    base_n: Mapped[int | None] = mapped_column(Integer)
    head_median: Mapped[float | None] = mapped_column(Float)
    head_n: Mapped[int | None] = mapped_column(Integer)
    change_pct: Mapped[float | None] = mapped_column(Float)
    worse_pct: Mapped[float | None] = mapped_column(Float)
    threshold_pct: Mapped[float | None] = mapped_column(Float)
    verdict: Mapped[str] = mapped_column(String(16))
    note: Mapped[str] = mapped_column(Text)
    #: zlops.model.Figures.to_dict(): what the verdict compared and the change computed from it
    figures: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))


class ComparisonArchive(Base):
    """A compare table that a rescore replaced, kept beside the current one (its rows as JSON)."""

    __tablename__ = "comparison_archive"
    __table_args__ = (UniqueConstraint("run_id", "revision"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    revision: Mapped[int] = mapped_column(Integer)
    archived_at: Mapped[datetime] = mapped_column(UTCDateTime)
    reason: Mapped[str] = mapped_column(Text)
    rows: Mapped[list[dict[str, Any]]] = mapped_column(JSON)


class Notification(Base):
    """The outbox: a message is stored before it is sent, so a failed post never loses it.

    ``payload`` is a ``chat.postMessage`` argument dict, or ``{"files": [...]}`` for an upload
    (``files_upload_v2``). A message with ``parent_id`` goes into its parent's thread, so it waits
    until the parent is sent. ``ts`` and ``channel_id`` are Slack's answer; ``result`` keeps what an
    upload returned (file ids and permalinks).
    """

    __tablename__ = "notifications"
    __table_args__ = (
        UniqueConstraint("run_id", "kind", "channel"),
        CheckConstraint("status IN ('pending', 'sent', 'failed', 'abandoned')", name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # no cascade: deleting a run must not silently drop messages that were never delivered
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    kind: Mapped[str] = mapped_column(String(50))
    channel: Mapped[str] = mapped_column(String(200))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("notifications.id"))
    ts: Mapped[str | None] = mapped_column(String(32))
    channel_id: Mapped[str | None] = mapped_column(String(32))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))


class AlertRow(Base):
    """One regression alert: a series from the night it was flagged until fixed or closed by a person.

    Keyed by (suite, pool, case, metric, opened_run_id): at most one alert per series per run, so a
    re-run report step finds the alert it made instead of making another. ``base_value`` (in
    ``unit``) is the reference the alert keeps: back within ``band_pct`` of it means fixed.
    """

    __tablename__ = "alerts"
    __table_args__ = (
        UniqueConstraint("suite", "pool", "case", "metric", "opened_run_id"),
        Index(None, "suite", "state"),
        CheckConstraint("state IN ('new', 'confirmed', 'acked', 'expected', 'false_positive', 'fixed', "
                        "'wontfix', 'cleared')", name="state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200))
    pool: Mapped[str] = mapped_column(String(100))
    case: Mapped[str] = mapped_column(String(500))
    metric: Mapped[str] = mapped_column(String(100))
    unit: Mapped[str] = mapped_column(String(32))
    lower_is_better: Mapped[bool] = mapped_column(Boolean)
    state: Mapped[str] = mapped_column(String(16))
    opened_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    last_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    base_value: Mapped[float] = mapped_column(Float)
    band_pct: Mapped[float] = mapped_column(Float)
    first_base_sha: Mapped[str] = mapped_column(String(64))
    first_head_sha: Mapped[str] = mapped_column(String(64))
    last_head_sha: Mapped[str] = mapped_column(String(64))
    last_change_pct: Mapped[float | None] = mapped_column(Float)
    worst_worse_pct: Mapped[float | None] = mapped_column(Float)
    thread_notification_id: Mapped[int | None] = mapped_column(ForeignKey("notifications.id"))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    channel_id: Mapped[str | None] = mapped_column(String(32))
    note: Mapped[str] = mapped_column(Text)
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class AlertEvent(Base):
    """The history of an alert: opened, each state change (by the nightly or a person), each worsening."""

    __tablename__ = "alert_events"
    __table_args__ = (Index(None, "alert_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"))
    # the nightly run that caused it; None for a person's change
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    kind: Mapped[str] = mapped_column(String(16))
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    change_pct: Mapped[float | None] = mapped_column(Float)
    note: Mapped[str] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(String(100))
    announced: Mapped[bool] = mapped_column(Boolean)


#: Values of ``bisections.state`` (see :class:`zlops.bisect.search.State`).
BISECTION_STATES = ("running", "found", "unverified", "ambiguous", "not_reproduced", "paused", "failed")


class BisectionRow(Base):
    """One bisection of a commit range on one pool (zlops.bisect.run): its targets, budget use and culprit.

    Keyed by (suite, pool, good_sha, bad_sha): alerts of the same range and pool share it (one
    search, one message), and a rerun finds it instead of starting another. ``targets`` holds the
    regressed series (case, metric, unit, lower_is_better); ``commits`` the range, oldest first
    (``commits[0]`` the good end); ``culprit_*`` are set when the search named a commit.
    """

    __tablename__ = "bisections"
    __table_args__ = (
        UniqueConstraint("suite", "pool", "good_sha", "bad_sha"),
        CheckConstraint("state IN ('running', 'found', 'unverified', 'ambiguous', 'not_reproduced', 'paused', "
                        "'failed')", name="state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200))
    pool: Mapped[str] = mapped_column(String(100))
    device: Mapped[int] = mapped_column(Integer)
    good_sha: Mapped[str] = mapped_column(String(64))
    bad_sha: Mapped[str] = mapped_column(String(64))
    commits: Mapped[list[str]] = mapped_column(JSON)
    targets: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    culprit_sha: Mapped[str | None] = mapped_column(String(64))
    culprit_subject: Mapped[str | None] = mapped_column(Text)
    culprit_author: Mapped[str | None] = mapped_column(String(250))
    candidates: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class BisectionAlert(Base):
    """Which bisection an alert's culprit comes from (an alert belongs to at most one)."""

    __tablename__ = "bisection_alerts"

    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"), primary_key=True)
    bisection_id: Mapped[int] = mapped_column(ForeignKey("bisections.id", ondelete="CASCADE"), index=True)


class BisectionStep(Base):
    """One decided step of a bisection (reproduce, step or verify): an A/B of ``base_sha`` vs ``sha``.

    Unique per (bisection, kind, sha): a rerun resumes from these rows and never writes a step twice.
    ``evidence`` holds per case the A/B's figures (zlops.model.Figures.to_dict) and the line it was
    judged against; ``builds`` the commits first built for it; ``seconds`` its device time.
    """

    __tablename__ = "bisection_steps"
    __table_args__ = (
        UniqueConstraint("bisection_id", "kind", "sha"),
        Index(None, "at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_id: Mapped[int] = mapped_column(ForeignKey("bisections.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    sha: Mapped[str] = mapped_column(String(64))
    base_sha: Mapped[str] = mapped_column(String(64))
    position: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16))
    pairs: Mapped[int] = mapped_column(Integer)
    seconds: Mapped[float] = mapped_column(Float)
    builds: Mapped[int] = mapped_column(Integer)
    evidence: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    note: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class KernelInventoryRow(Base):
    """A shard's kernel inventory (zlops.kernels): which provider, whether it could tell, what it dropped.

    One per shard (``shard_id`` unique): a re-ingested shard replaces it. ``state`` is ok, none (no
    provider can tell: ``reason`` says why) or error; ``dropped`` counts the kernels over the cap
    (``kernels.max_per_shard``), ``dropped_names`` the first of them; ``autotune`` the autotuner's
    cached picks (kernel, key, config).
    """

    __tablename__ = "kernel_inventories"
    __table_args__ = (UniqueConstraint("shard_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    shard_id: Mapped[int] = mapped_column(ForeignKey("shards.id", ondelete="CASCADE"))
    provider: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(8))
    reason: Mapped[str] = mapped_column(Text)
    kernels_n: Mapped[int] = mapped_column(Integer)
    dropped: Mapped[int] = mapped_column(Integer)
    dropped_names: Mapped[list[str]] = mapped_column(JSON)
    autotune: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    parse_s: Mapped[float | None] = mapped_column(Float)


class KernelRow(Base):
    """One compiled kernel of a shard's inventory; unique per (inventory, cache_key)."""

    __tablename__ = "kernels"
    __table_args__ = (UniqueConstraint("inventory_id", "cache_key"), Index(None, "name"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    inventory_id: Mapped[int] = mapped_column(ForeignKey("kernel_inventories.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(250))
    cache_key: Mapped[str] = mapped_column(String(128))
    code_hash: Mapped[str | None] = mapped_column(String(64))
    binary: Mapped[str | None] = mapped_column(String(16))
    num_warps: Mapped[int | None] = mapped_column(Integer)
    num_stages: Mapped[int | None] = mapped_column(Integer)
    num_ctas: Mapped[int | None] = mapped_column(Integer)
    backend: Mapped[str | None] = mapped_column(String(32))
    arch: Mapped[str | None] = mapped_column(String(32))
    shared: Mapped[int | None] = mapped_column(Integer)
    constants: Mapped[dict[str, Any]] = mapped_column(JSON)
    compiler_version: Mapped[str | None] = mapped_column(String(64))
    compiled: Mapped[bool | None] = mapped_column(Boolean)


class CanaryNightRow(Base):
    """One night of a recall canary's series (zlops.judge.canary): what was planted and what the judge said.

    One per (run, pool, case, metric), ``case`` the canary's (``<source> [canary]``). ``night`` counts the
    suite's canary nights before this one (the schedule's clock); ``episode`` is the night its episode
    started (active nights only); ``planted_pct`` is 0 on a quiet night. ``verdict`` (the canary row's
    final verdict, after any A/B), ``source_verdict`` (the source series' the same night), ``change_pct``
    and ``how`` (A/B, nights or paired runs: what decided it) are filled by the report step; null before.
    ``at`` is the run's start, so the trust ledger reads a window in one query.
    """

    __tablename__ = "canary_nights"
    __table_args__ = (UniqueConstraint("run_id", "pool", "case", "metric"), Index(None, "suite", "at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    suite: Mapped[str] = mapped_column(String(200))
    pool: Mapped[str] = mapped_column(String(100))
    case: Mapped[str] = mapped_column(String(500))
    metric: Mapped[str] = mapped_column(String(100))
    source_case: Mapped[str] = mapped_column(String(500))
    night: Mapped[int] = mapped_column(Integer)
    active: Mapped[bool] = mapped_column(Boolean)
    episode: Mapped[int | None] = mapped_column(Integer)
    planted_pct: Mapped[float] = mapped_column(Float)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    verdict: Mapped[str | None] = mapped_column(String(16))
    source_verdict: Mapped[str | None] = mapped_column(String(16))
    change_pct: Mapped[float | None] = mapped_column(Float)
    how: Mapped[str | None] = mapped_column(String(16))


class ForgeCheckRow(Base):
    """A check zlops opened on a forge ("running") and must finish: one per (compare run, suite's check, commit).

    The webhook receiver writes it before it posts "running"; ``run_id`` is the compare that answers it (the DAG
    run's id, or the standalone receiver's label). ``state`` moves open -> closed when the compare's conclusion is
    queued, or open -> closing -> closed when zlops closes it itself (the compare raised, ran past
    ``deadline_at``, or the receiver that ran it restarted): ``conclusion``/``reason`` are what the closing check
    says, ``error`` the last post that failed (a closing check is posted again by the next sweep).
    ``runner``: ``local`` (the standalone receiver's own thread) or ``airflow``.
    """

    __tablename__ = "forge_checks"
    __table_args__ = (UniqueConstraint("channel", "external_id", "head_sha", "run_id"), Index(None, "state"),
                      Index(None, "run_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel: Mapped[str] = mapped_column(String(300))
    suite: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(100))
    external_id: Mapped[str] = mapped_column(String(300))
    head_sha: Mapped[str] = mapped_column(String(64))
    pr: Mapped[int | None] = mapped_column(Integer)
    ref: Mapped[str] = mapped_column(String(300))
    run_id: Mapped[str] = mapped_column(String(250))
    runner: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime)
    deadline_at: Mapped[datetime] = mapped_column(UTCDateTime)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    conclusion: Mapped[str | None] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)


class ForgeDeliveryRow(Base):
    """A verified webhook delivery and what the receiver decided: replay protection and rate limits.

    Unique per (forge, body digest): a delivery replayed byte for byte (its ``X-GitHub-Delivery`` header is not
    signed, so the body is what counts) is found again and runs nothing; ``delivery`` keeps the forge's own id.
    ``decision`` (triggered, refused, limited, duplicate, ignored, ...) and ``outcome`` (the answer's sentence)
    are filled once decided; ``repo``/``pr``/``actor`` count a PR's and a commenter's triggers in a window.
    """

    __tablename__ = "forge_deliveries"
    __table_args__ = (UniqueConstraint("forge", "body_sha"), Index(None, "received_at"), Index(None, "repo", "pr"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    forge: Mapped[str] = mapped_column(String(16))
    delivery: Mapped[str | None] = mapped_column(String(100))
    body_sha: Mapped[str] = mapped_column(String(64))
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    repo: Mapped[str | None] = mapped_column(String(300))
    pr: Mapped[int | None] = mapped_column(Integer)
    actor: Mapped[str | None] = mapped_column(String(200))
    decision: Mapped[str] = mapped_column(String(32))
    outcome: Mapped[str | None] = mapped_column(Text)
