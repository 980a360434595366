"""job_runs and job_executions partitioned by day; retention drops whole partitions

Revision ID: 0020_partitioned_runs
Revises: 0019_outbox_priority, 0008_executions (both tables it partitions; it joins the two)

At 100 M jobs a day, deleting finished runs row by row (the old `purge_finished`) costs as much
as writing them, and `job_executions` was never purged at all. Both tables become range-
partitioned by day (UTC), and retention drops a whole day at once (docs/scaling.md):

- `job_runs.created_on` (date, UTC): the day the run's row was first written. It never changes
  (a re-send, a replay, a takeover keep it), so a run stays in its partition for life: `queued_at`
  is rewritten by re-sends and could not be the key (an `ON CONFLICT DO UPDATE` cannot move a
  row to another partition). The primary key is `(id, created_on)` and the job id is unique per
  `(job_id, created_on)`: Postgres enforces uniqueness only within a partition.
- One row per job id all the same: every statement that may create a run (the run writer's
  QUEUED and START batches, `shared/outbox/stage_run.sql`) takes its `created_on` from
  `jobfleet_run_created_on(job_id)`, which locks the job id (a transaction-scoped advisory lock,
  fine behind PgBouncer in transaction mode) and returns the day of the existing row, or today.
  A second writer of the same new job id waits on that lock, then sees the first one's row
  (the function's query takes a fresh snapshot), and its `ON CONFLICT (job_id, created_on)`
  meets that row: without the lock, two first writes that straddle midnight UTC would make two
  rows in two partitions.
- `job_executions` is partitioned by `started_at` (never updated); primary key `(id,
  started_at)`. No foreign key joins it to `job_runs` (there never was one: a foreign key to a
  partitioned table would have to name `(job_id, created_on)` and would forbid dropping a runs
  partition while an executions partition still refers to it).
- Partitions: one per day, created ahead (`jobfleet_create_partitions(first, last)`, called here
  for today and the next days and by the scheduler's maintenance), and a DEFAULT partition per
  table that catches a row no day partition covers, so an insert never fails when the
  maintenance has not run. When the day's partition is created later, its rows move out of the
  default partition first (Postgres refuses to create a partition whose rows sit in the default).
- The existing table keeps every row and is not copied (an empty one is dropped): it becomes
  the partition of every day up to today (`FROM (MINVALUE) TO (tomorrow)`), its rows'
  `created_on` the migration day (a constant default: no rewrite). Its indexes are adopted as
  they are (each becomes the partition's copy of the same index); only the primary key and the
  unique job id index are built again with `created_on` in them (two index builds over the
  whole table: writes wait meanwhile). Those rows stay until that partition expires, one
  retention period after the migration.
- `jobfleet_drop_partitions(cutoff)`: the retention. A day partition wholly older than the
  cutoff's day is detached and dropped; the runs the old purge would have kept (DEAD, not
  finished, finished after the cutoff) and their executions are first copied into the default
  partitions, where `purge_finished` deletes them row by row when their time comes (few rows).
"""

from __future__ import annotations

from alembic import op

revision = "0020_partitioned_runs"
down_revision = ("0019_outbox_priority", "0008_executions")
branch_labels = None
depends_on = None

#: Days of partitions created ahead of today at migration time (the maintenance keeps it up).
AHEAD_DAYS = 3

RUN_CREATED_ON = """
CREATE OR REPLACE FUNCTION jobfleet_run_created_on(j text) RETURNS date
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    d date;
BEGIN
    -- Two writers of one new job id: the second waits here, then (a new snapshot for the
    -- query below) finds the first one's row and takes its day.
    PERFORM pg_advisory_xact_lock(hashtext('jobfleet.job_runs'), hashtext(j));
    SELECT r.created_on INTO d FROM job_runs AS r WHERE r.job_id = j LIMIT 1;
    RETURN COALESCE(d, (now() AT TIME ZONE 'UTC')::date);
END $$
"""

#: The day partitions of both tables, `<table>_pYYYYMMDD`, for the days `first` to `last`.
CREATE_PARTITIONS = """
CREATE OR REPLACE FUNCTION jobfleet_create_partitions(first date, last date) RETURNS integer
LANGUAGE plpgsql VOLATILE SET TimeZone = 'UTC' AS $$
DECLARE
    d date;
    t record;
    part text;
    lo text;
    hi text;
    made integer := 0;
    waited text := current_setting('lock_timeout');
BEGIN
    -- Creating a partition locks the default one: give up (until the next run) rather than
    -- hold its readers up behind a long query.
    PERFORM set_config('lock_timeout', '5s', true);
    FOR d IN SELECT generate_series(first, last, interval '1 day')::date LOOP
        FOR t IN SELECT * FROM (VALUES ('job_runs', 'created_on', false),
                                       ('job_executions', 'started_at', true)) AS v(tbl, col, ts)
        LOOP
            part := format('%s_p%s', t.tbl, to_char(d, 'YYYYMMDD'));
            CONTINUE WHEN to_regclass(part) IS NOT NULL;
            IF t.ts THEN
                lo := format('%s 00:00:00+00', d);
                hi := format('%s 00:00:00+00', d + 1);
            ELSE
                lo := d::text;
                hi := (d + 1)::text;
            END IF;
            BEGIN
                EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                               part, t.tbl, lo, hi);
                made := made + 1;
            EXCEPTION
                WHEN invalid_object_definition THEN
                    NULL;  -- another partition covers that day (the one from before partitioning)
                WHEN check_violation THEN
                    -- The default partition holds rows of that day (written while no partition
                    -- covered it): they move to the day's partition, then it is attached.
                    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS)', part, t.tbl);
                    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %L AND %I < %L '
                                   'RETURNING *) INSERT INTO %I SELECT * FROM moved',
                                   t.tbl || '_default', t.col, lo, t.col, hi, part);
                    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                                   t.tbl, part, lo, hi);
                    made := made + 1;
            END;
        END LOOP;
    END LOOP;
    PERFORM set_config('lock_timeout', waited, true);
    RETURN made;
END $$
"""

#: Retention: every day partition whose days all precede the cutoff's day goes, its survivors
#: (what the row-by-row purge kept) copied into the default partitions first.
DROP_PARTITIONS = """
CREATE OR REPLACE FUNCTION jobfleet_drop_partitions(cutoff timestamptz)
RETURNS TABLE (partition_name text, kept bigint)
LANGUAGE plpgsql VOLATILE SET TimeZone = 'UTC' AS $$
DECLARE
    cutoff_day date := (cutoff AT TIME ZONE 'UTC')::date;
    t record;
    p record;
    cols text;
    survivors text;
    n bigint;
    waited text := current_setting('lock_timeout');
BEGIN
    -- Runs first: the executions kept are those of the runs kept, in job_runs_default by then.
    FOR t IN SELECT * FROM (VALUES
        (1, 'job_runs', 'r.status NOT IN (''COMPLETED'', ''CANCELED'') '
                        'OR r.finished_at IS NULL OR r.finished_at >= $1'),
        (2, 'job_executions', 'r.job_id IN (SELECT job_id FROM job_runs_default)')
    ) AS v(o, tbl, keep) ORDER BY o
    LOOP
        SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
          FROM pg_attribute a
         WHERE a.attrelid = t.tbl::regclass AND a.attnum > 0 AND NOT a.attisdropped;
        FOR p IN
            SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
              FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = t.tbl::regclass
             ORDER BY c.relname
        LOOP
            CONTINUE WHEN p.bound = 'DEFAULT';
            -- Bounds read in UTC (the function's time zone): a date, or midnight UTC.
            CONTINUE WHEN substring(p.bound FROM 'TO \\(''([^'']+)''\\)')::timestamptz
                          > cutoff_day::timestamptz;
            -- Detaching takes an exclusive lock on the table: give up (until the next run)
            -- rather than hold writers up behind a long query.
            PERFORM set_config('lock_timeout', '5s', true);
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', t.tbl, p.relname);
            EXECUTE format('INSERT INTO %I (%s) SELECT %s FROM %I AS r WHERE %s',
                           t.tbl, cols, cols, p.relname, t.keep) USING cutoff;
            GET DIAGNOSTICS n = ROW_COUNT;
            EXECUTE format('DROP TABLE %I', p.relname);
            partition_name := p.relname;
            kept := n;
            RETURN NEXT;
        END LOOP;
    END LOOP;
    PERFORM set_config('lock_timeout', waited, true);
END $$
"""


def _indexes(conn_table: str) -> str:
    """The statement listing `conn_table`'s indexes that are no constraint's: (name, definition)."""
    return (
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid "
        f"WHERE x.indrelid = '{conn_table}'::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid) ORDER BY 1"
    )


def _kind(constraint: str) -> str:
    return (
        "PRIMARY KEY" if constraint.startswith("pk_") or constraint.endswith("_pkey") else "UNIQUE"
    )


def _partition(
    table: str, legacy: str, key_sql: str, bound_to: str, keys: dict[str, tuple[str, str]]
) -> None:
    """`table` becomes partitioned by range; its rows stay where they are, as partition
    `legacy` of every day up to today. `keys`: constraint name → its new name and columns."""
    bind = op.get_bind()
    indexes = bind.exec_driver_sql(_indexes(table)).fetchall()
    op.execute(f"ALTER TABLE {table} RENAME TO {legacy}")
    for name in keys:
        op.execute(f"ALTER TABLE {legacy} DROP CONSTRAINT {name}")
    # The old table's indexes keep their definitions; the partitioned table's take their names.
    for name, _ in indexes:
        op.execute(f"ALTER INDEX {name} RENAME TO {legacy}_{name.removeprefix('ix_')}")
    op.execute(
        f"CREATE TABLE {table} (LIKE {legacy} INCLUDING DEFAULTS INCLUDING GENERATED "
        f"INCLUDING STORAGE) PARTITION BY RANGE ({key_sql})"
    )
    for name, columns in keys.values():
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {_kind(name)} ({columns})")
    for _, definition in indexes:
        # The definition names the table as it was: `... ON public.<table> USING ...`.
        op.execute(definition)
    # An id sequence belonged to the old table's column: it would go with that table.
    op.execute(f"ALTER SEQUENCE IF EXISTS {table}_id_seq OWNED BY {table}.id")
    if bind.exec_driver_sql(f"SELECT EXISTS (SELECT 1 FROM {legacy})").scalar():
        op.execute(
            f"ALTER TABLE {table} ATTACH PARTITION {legacy} "
            f"FOR VALUES FROM (MINVALUE) TO ({bound_to})"
        )
    else:  # a new database: nothing to keep
        op.execute(f"DROP TABLE {legacy}")
    op.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")


def upgrade() -> None:
    tomorrow = "((now() AT TIME ZONE 'UTC')::date + 1)"
    # The rows from before: created "today" as far as retention goes (a constant: no rewrite).
    op.execute("DROP TRIGGER job_runs_version ON job_runs")
    op.execute(
        "DO $$ BEGIN EXECUTE format('ALTER TABLE job_runs ADD COLUMN created_on date NOT NULL "
        "DEFAULT %L', (now() AT TIME ZONE 'UTC')::date); END $$"
    )
    op.execute(
        "ALTER TABLE job_runs ALTER COLUMN created_on SET DEFAULT (now() AT TIME ZONE 'UTC')::date"
    )
    _partition(
        "job_runs",
        "job_runs_legacy",
        "created_on",
        f"({tomorrow})",
        {
            "pk_job_runs": ("pk_job_runs", "id, created_on"),
            "uq_job_runs_job_id": ("uq_job_runs_job_id_created_on", "job_id, created_on"),
        },
    )
    op.execute(
        "CREATE TRIGGER job_runs_version BEFORE UPDATE ON job_runs "
        "FOR EACH ROW EXECUTE FUNCTION jobfleet_run_version()"
    )
    _partition(
        "job_executions",
        "job_executions_legacy",
        "started_at",
        f"(({tomorrow})::timestamp AT TIME ZONE 'UTC')",
        {"job_executions_pkey": ("job_executions_pkey", "id, started_at")},
    )
    op.execute(RUN_CREATED_ON)
    op.execute(CREATE_PARTITIONS)
    op.execute(DROP_PARTITIONS)
    op.execute(
        "SELECT jobfleet_create_partitions((now() AT TIME ZONE 'UTC')::date, "
        f"(now() AT TIME ZONE 'UTC')::date + {AHEAD_DAYS})"
    )


def _unpartition(table: str, keys: dict[str, str]) -> None:
    """Every row of partitioned `table` back into one plain table with the same indexes."""
    bind = op.get_bind()
    indexes = bind.exec_driver_sql(_indexes(table)).fetchall()
    op.execute(f"CREATE TABLE {table}_plain (LIKE {table} INCLUDING DEFAULTS INCLUDING STORAGE)")
    op.execute(f"INSERT INTO {table}_plain SELECT * FROM {table}")
    op.execute(f"ALTER SEQUENCE IF EXISTS {table}_id_seq OWNED BY NONE")
    op.execute(f"DROP TABLE {table}")
    op.execute(f"ALTER TABLE {table}_plain RENAME TO {table}")
    for name, columns in keys.items():
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {_kind(name)} ({columns})")
    for _, definition in indexes:
        # A partitioned table's index is `ON ONLY` it.
        op.execute(definition.replace(" ON ONLY ", " ON ", 1))


def downgrade() -> None:
    op.execute("DROP FUNCTION jobfleet_drop_partitions(timestamptz)")
    op.execute("DROP FUNCTION jobfleet_create_partitions(date, date)")
    op.execute("DROP FUNCTION jobfleet_run_created_on(text)")
    _unpartition("job_executions", {"job_executions_pkey": "id"})
    op.execute("ALTER SEQUENCE job_executions_id_seq OWNED BY job_executions.id")
    # A job id written twice (in two partitions) fails the unique constraint here, loudly.
    _unpartition("job_runs", {"pk_job_runs": "id", "uq_job_runs_job_id": "job_id"})
    op.execute("ALTER TABLE job_runs DROP COLUMN created_on")
    op.execute(
        "CREATE TRIGGER job_runs_version BEFORE UPDATE ON job_runs "
        "FOR EACH ROW EXECUTE FUNCTION jobfleet_run_version()"
    )
