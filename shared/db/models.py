"""Kernel tables (DESIGN §4). Domain tables live with their workers' migrations."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    DDL,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    event,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


# `ix_job_runs_console_error` is a trigram index: the schema built from these models needs
# pg_trgm as the migration does (0017_console_search).
event.listen(Base.metadata, "before_create", DDL("CREATE EXTENSION IF NOT EXISTS pg_trgm"))  # type: ignore[no-untyped-call]


class JobRun(Base):
    """One job id's life: the source of truth for dedup, status and the dead-letter queue."""

    __tablename__ = "job_runs"

    id: Mapped[uuid.UUID] = mapped_column(
        UUID, primary_key=True, default=uuid.uuid4, server_default=func.gen_random_uuid()
    )
    #: The UTC day the run's row was first written, never changed: the partition key
    #: (migration 0020_partitioned_runs). A write that may create a run takes it from
    #: `jobfleet_run_created_on(job_id)`, so that a job id has one row whatever the day.
    created_on: Mapped[date] = mapped_column(
        Date, primary_key=True, server_default=text("((now() AT TIME ZONE 'UTC'::text))::date")
    )
    org_id: Mapped[uuid.UUID] = mapped_column(UUID, nullable=False)
    job_name: Mapped[str] = mapped_column(String(100), nullable=False)
    # Unique with `created_on` (Postgres enforces uniqueness within a partition only).
    job_id: Mapped[str] = mapped_column(Text, nullable=False)
    queue: Mapped[str] = mapped_column(String(100), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    entity_type: Mapped[str | None] = mapped_column(String(100))
    entity_id: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    result: Mapped[Any | None] = mapped_column(JSONB)
    error_code: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    attempt: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    max_attempts: Mapped[int | None] = mapped_column(Integer)
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    checkpoint: Mapped[Any | None] = mapped_column(JSONB)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    request_id: Mapped[str | None] = mapped_column(String(200))
    message_id: Mapped[str | None] = mapped_column(String(64))
    queued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    next_retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    replayed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    replayed_by: Mapped[str | None] = mapped_column(String(200))
    replay_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    # Every start on the record, and the lease it runs under (migration 0008_executions).
    executions: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    lease_owner: Mapped[str | None] = mapped_column(Text)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Bumped by a trigger on every update (migration 0016_staged_runs): SSE event ids.
    version: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="1")

    __table_args__ = (
        UniqueConstraint("job_id", "created_on"),
        # Every write of a run changes `status`: each adds an entry to every index here, about
        # half of Postgres's CPU per start and outcome. An index that another one already
        # serves goes (migration 0015_run_indexes; tests/integration/test_run_indexes.py).
        Index("ix_job_runs_org_status", "org_id", "status", "queued_at"),
        Index("ix_job_runs_status_queue", "status", "queue"),
        # The operator console's pages: keyset pagination newest first on (queued_at, id),
        # one index per leading filter (migration 0013_console; ties broken by the 16-byte id
        # rather than the job id since 0021_run_index_ids).
        Index("ix_job_runs_console_recent", text("queued_at DESC"), text("id DESC")),
        Index("ix_job_runs_console_org", "org_id", text("queued_at DESC"), text("id DESC")),
        Index("ix_job_runs_console_job", "job_name", text("queued_at DESC"), text("id DESC")),
        Index("ix_job_runs_console_status", "status", text("queued_at DESC"), text("id DESC")),
        Index("ix_job_runs_console_entity", "entity_id"),
        Index(
            "ix_job_runs_console_request",
            "request_id",
            postgresql_where=text("request_id IS NOT NULL"),
        ),
        Index(
            "ix_job_runs_console_dead",
            text("queued_at DESC"),
            text("id DESC"),
            postgresql_include=["error_code", "queue", "job_name", "org_id"],
            postgresql_where=text("status = 'DEAD'"),
        ),
        Index(
            "ix_job_runs_finished_at_job",
            "finished_at",
            postgresql_include=["job_name", "queue", "status", "started_at"],
            postgresql_where=text("finished_at IS NOT NULL"),
        ),
        # The console's search line: payload fields and error text (migration
        # 0017_console_search; the trigram index only where pg_trgm is available).
        Index(
            "ix_job_runs_console_payload",
            "payload",
            postgresql_using="gin",
            postgresql_ops={"payload": "jsonb_path_ops"},
        ),
        Index(
            "ix_job_runs_console_error",
            "error",
            postgresql_using="gin",
            postgresql_ops={"error": "gin_trgm_ops"},
            postgresql_where=text("error IS NOT NULL"),
        ),
        # One partition per day, a default one, retention by dropping days (docs/scaling.md).
        {"postgresql_partition_by": "RANGE (created_on)"},
    )


class JobReplay(Base):
    """Audit of operator replays: who replayed which dead job, when, and the error it had."""

    __tablename__ = "job_replays"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(Text, nullable=False, index=True)
    replayed_by: Mapped[str] = mapped_column(String(200), nullable=False)
    replayed_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    previous_error_code: Mapped[str | None] = mapped_column(String(64))
    previous_error: Mapped[str | None] = mapped_column(Text)
    previous_attempt: Mapped[int | None] = mapped_column(Integer)


class OutboxEvent(Base):
    """A job to publish once the producer's transaction commits (transactional outbox)."""

    __tablename__ = "outbox_events"

    id: Mapped[uuid.UUID] = mapped_column(
        UUID, primary_key=True, default=uuid.uuid4, server_default=func.gen_random_uuid()
    )
    org_id: Mapped[uuid.UUID] = mapped_column(UUID, nullable=False)
    type: Mapped[str] = mapped_column(String(100), nullable=False)
    job_name: Mapped[str] = mapped_column(String(100), nullable=False)
    job_id: Mapped[str] = mapped_column(Text, nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    request_id: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), nullable=False, server_default="PENDING")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    locked_by: Mapped[str | None] = mapped_column(String(200))
    locked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)
    #: When the job is due (`scheduled_at` / delay); the broker holds it until then.
    deliver_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: Its priority (high, default, low); None: its job's own.
    priority: Mapped[str | None] = mapped_column(String(8))

    __table_args__ = (
        Index(
            "ix_outbox_events_pending",
            "next_attempt_at",
            postgresql_where=text("status = 'PENDING'"),
        ),
        Index(
            "ix_outbox_events_pending_job",
            "job_id",
            postgresql_where=text("status = 'PENDING'"),
        ),
    )


class FileObject(MappedAsDataclass, Base, kw_only=True):
    """A stored artefact (an export, an uploaded document) and where it lives: its `file_objects`
    row. The one row type of that table, and a plain dataclass as well (keyword arguments):

    - the storage port builds it with no database (`ObjectWriter.commit()`, shared/storage: where
      and what was stored, and a fresh `id`);
    - the caller names the owner (`org_id`) and records the row, through a session or with SQL;
    - readers load it with `psycopg.rows.class_row(FileObject)` as well as through a session.
    """

    __tablename__ = "file_objects"

    id: Mapped[uuid.UUID] = mapped_column(
        UUID,
        primary_key=True,
        default_factory=uuid.uuid4,
        server_default=func.gen_random_uuid(),
    )
    #: None until the caller names the owner (the storage port does not know it); required in the row.
    org_id: Mapped[uuid.UUID | None] = mapped_column(UUID, nullable=False, index=True, default=None)
    provider: Mapped[str] = mapped_column(String(16), nullable=False)  # LOCAL | S3
    bucket: Mapped[str | None] = mapped_column(String(255))
    key: Mapped[str] = mapped_column(Text, nullable=False)
    content_type: Mapped[str] = mapped_column(String(255), nullable=False)
    size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    sha256: Mapped[str] = mapped_column(String(64), nullable=False)
    #: Set by the database when the row is written.
    created_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now(), default=None
    )
