-- What each index of job_runs and job_executions costs a write, in WAL bytes and size
-- (docs/kernel.md, "The run store's indexes"). On a fresh database filled as bench/console.py
-- fills its sandbox, e.g. 300,000 runs:
--   createdb -h 127.0.0.1 -U postgres index_scratch
--   .venv/bin/python -c "from shared.db.migrate import upgrade; from bench.console import generate;
--     upgrade('postgresql+psycopg://postgres@127.0.0.1:5432/index_scratch');
--     generate('postgresql://postgres@127.0.0.1:5432/index_scratch', 300_000)"
--   psql -h 127.0.0.1 -U postgres -d index_scratch -At -F ' | ' -f bench/run_index_write_cost.sql
-- Needs pg_walinspect (contrib, Postgres 15+) and a superuser.
--
-- Sets the status of 20,000 random COMPLETED runs to RUNNING, one row a statement (every
-- write of a run changes `status`: no update is heap-only, each adds an entry to every index),
-- inserts 20,000 executions, one row a statement, and makes 20,000 other COMPLETED runs DEAD
-- with an error (what the dead-letter and error-text indexes pay); each in a transaction
-- rolled back.
-- A CHECKPOINT comes before each, so the first change of each page after it writes the whole
-- page (full-page image, `fpi`), as the first write after each checkpoint does in production.
-- Prints, per index (a partition's index counts as its parent's; `(heap)`: the table): its
-- size before the writes, then the WAL bytes of the records that changed it per row updated and per row
-- inserted (`record`: without full-page images; `fpi`: the full-page images), and each
-- statement's time per row (µs; the machine's load matters: note it). A checkpoint during a measure (another database's writes, the timer)
-- makes pages written again in full: the `fpi` of that run is not comparable, run it again.
\set QUIET on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_walinspect;
-- Keeps the WAL read below until the session ends (a checkpoint would recycle it).
SELECT pg_create_physical_replication_slot('run_index_write_cost', true, true) AS slot \gset
CREATE TEMP TABLE parents AS
SELECT c.oid, c.relfilenode, COALESCE(p.relname, c.relname) AS name,
       COALESCE(pt.relname, t.relname) AS tbl
  FROM pg_class c
  JOIN pg_index x ON x.indexrelid = c.oid
  JOIN pg_class t ON t.oid = x.indrelid
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent
  LEFT JOIN pg_inherits ti ON ti.inhrelid = t.oid LEFT JOIN pg_class pt ON pt.oid = ti.inhparent
 WHERE c.relkind = 'i' AND COALESCE(pt.relname, t.relname) IN ('job_runs', 'job_executions')
UNION ALL
SELECT c.oid, c.relfilenode, '(heap)', COALESCE(p.relname, c.relname)
  FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
  LEFT JOIN pg_class p ON p.oid = i.inhparent
 WHERE c.relkind = 'r' AND COALESCE(p.relname, c.relname) IN ('job_runs', 'job_executions');
-- Each index's size before the writes below (rolled back, they leave their entries behind).
CREATE TEMP TABLE sizes AS
SELECT tbl, name, sum(pg_relation_size(oid)) AS bytes FROM parents GROUP BY tbl, name;
CREATE TEMP TABLE picked AS
SELECT id, created_on, job_id, row_number() OVER () AS n
  FROM (SELECT id, created_on, job_id FROM job_runs WHERE status = 'COMPLETED'
         ORDER BY random() LIMIT 40000) s;
CREATE TEMP TABLE cost (what text, name text, tbl text, rec bigint, fpi bigint);
CREATE OR REPLACE FUNCTION pg_temp.attribute(what text, lo pg_lsn, hi pg_lsn) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO cost
  SELECT what, p.name, p.tbl, sum(w.record_length - w.fpi_length), sum(w.fpi_length)
    FROM pg_get_wal_records_info(lo, hi) w
    JOIN parents p ON p.relfilenode = substring(w.block_ref FROM 'rel \d+/\d+/(\d+)')::oid
   GROUP BY p.name, p.tbl
$$;
CREATE OR REPLACE FUNCTION pg_temp.updates() RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); r record;
BEGIN
  FOR r IN SELECT id, created_on FROM picked WHERE n <= 20000 ORDER BY n LOOP
    UPDATE job_runs SET status = 'RUNNING' WHERE id = r.id AND created_on = r.created_on;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / 20000;
END $$;
CREATE OR REPLACE FUNCTION pg_temp.inserts() RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); r record;
BEGIN
  FOR r IN SELECT job_id FROM picked WHERE n <= 20000 ORDER BY n LOOP
    INSERT INTO job_executions (job_id, execution, attempt, worker, message_id, started_at)
    VALUES (r.job_id, 2, 2, 'bench:1:w', md5(r.job_id), now());
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / 20000;
END $$;
CREATE OR REPLACE FUNCTION pg_temp.deaths() RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); r record;
BEGIN
  FOR r IN SELECT id, created_on FROM picked WHERE n > 20000 ORDER BY n LOOP
    UPDATE job_runs SET status = 'DEAD', error_code = 'TIME_LIMIT',
           error = 'TimeLimitExceeded: the job ran longer than 600 s (bench)'
     WHERE id = r.id AND created_on = r.created_on;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / 20000;
END $$;
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS lo, checkpoints_timed + checkpoints_req AS c0 FROM pg_stat_bgwriter \gset
BEGIN;
SELECT pg_temp.updates() AS update_us \gset
ROLLBACK;
SELECT pg_current_wal_insert_lsn() AS hi, checkpoints_timed + checkpoints_req - :c0 AS update_c FROM pg_stat_bgwriter \gset
-- A commit that wrote WAL: the WAL up to here is flushed (readable).
DROP TABLE IF EXISTS pg_temp.flush; CREATE TEMP TABLE flush ();
SELECT pg_temp.attribute('update', :'lo', :'hi');
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS lo, checkpoints_timed + checkpoints_req AS c0 FROM pg_stat_bgwriter \gset
BEGIN;
SELECT pg_temp.inserts() AS insert_us \gset
ROLLBACK;
SELECT pg_current_wal_insert_lsn() AS hi, checkpoints_timed + checkpoints_req - :c0 AS insert_c FROM pg_stat_bgwriter \gset
-- A commit that wrote WAL: the WAL up to here is flushed (readable).
DROP TABLE IF EXISTS pg_temp.flush; CREATE TEMP TABLE flush ();
SELECT pg_temp.attribute('insert', :'lo', :'hi');
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS lo, checkpoints_timed + checkpoints_req AS c0 FROM pg_stat_bgwriter \gset
BEGIN;
SELECT pg_temp.deaths() AS death_us \gset
ROLLBACK;
SELECT pg_current_wal_insert_lsn() AS hi, checkpoints_timed + checkpoints_req - :c0 AS death_c FROM pg_stat_bgwriter \gset
-- A commit that wrote WAL: the WAL up to here is flushed (readable).
DROP TABLE IF EXISTS pg_temp.flush; CREATE TEMP TABLE flush ();
SELECT pg_temp.attribute('death', :'lo', :'hi');
\set QUIET off
SELECT 'per row: update of job_runs.status ' || round(:update_us) || ' µs, insert into job_executions '
       || round(:insert_us) || ' µs, death of a run ' || round(:death_us)
       || ' µs; checkpoints meanwhile (each adds full-page images): '
       || :update_c || ', ' || :insert_c || ', ' || :death_c;
SELECT p.tbl AS "table", p.name AS index,
       pg_size_pretty((SELECT z.bytes FROM sizes z WHERE z.tbl = p.tbl AND z.name = p.name)) AS size,
       COALESCE(max(u.rec), 0) / 20000 AS update_record_b, COALESCE(max(u.fpi), 0) / 20000 AS update_fpi_b,
       COALESCE(max(i.rec), 0) / 20000 AS insert_record_b, COALESCE(max(i.fpi), 0) / 20000 AS insert_fpi_b,
       COALESCE(max(d.rec), 0) / 20000 AS death_record_b, COALESCE(max(d.fpi), 0) / 20000 AS death_fpi_b
  FROM parents p
  LEFT JOIN cost u ON u.what = 'update' AND u.name = p.name AND u.tbl = p.tbl
  LEFT JOIN cost i ON i.what = 'insert' AND i.name = p.name AND i.tbl = p.tbl
  LEFT JOIN cost d ON d.what = 'death' AND d.name = p.name AND d.tbl = p.tbl
 GROUP BY p.tbl, p.name ORDER BY p.tbl DESC, p.name;
SELECT 'all', what, sum(rec) / 20000 AS record_b, sum(fpi) / 20000 AS fpi_b
  FROM cost GROUP BY what ORDER BY what DESC;
