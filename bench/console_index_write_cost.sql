-- What migration 0017_console_search's two GIN indexes cost a run's updates (docs/console.md).
-- On a database filled as bench/console.py fills its sandbox (1,000,000 runs), e.g.:
--   createdb -h 127.0.0.1 -U postgres console_scratch
--   .venv/bin/python -c "from shared.db.migrate import upgrade; from bench.console import generate;
--     upgrade('postgresql+psycopg://postgres@127.0.0.1:5432/console_scratch');
--     generate('postgresql://postgres@127.0.0.1:5432/console_scratch', 1_000_000, console_indexes=True)"
--   psql -h 127.0.0.1 -U postgres -d console_scratch -At -f bench/console_index_write_cost.sql
-- Each round sets 4,000 completed runs RUNNING then COMPLETED, one row a statement, in one
-- transaction that is rolled back: with the indexes, then without them (dropped inside the
-- transaction), interleaved four times. Prints "with|ms" and "without|ms" per round.
\set QUIET on
CREATE TEMP TABLE ids AS SELECT id, row_number() OVER () AS n FROM (SELECT id FROM job_runs WHERE status = 'COMPLETED' AND error IS NULL LIMIT 40000) s;
CREATE OR REPLACE FUNCTION pg_temp.bump(lo int, hi int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); r record;
BEGIN
  FOR r IN SELECT id FROM ids WHERE n >= lo AND n < hi LOOP
    UPDATE job_runs SET status = 'RUNNING' WHERE id = r.id;
    UPDATE job_runs SET status = 'COMPLETED' WHERE id = r.id;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
\set QUIET off
BEGIN; SELECT 'with', pg_temp.bump(1, 4001); ROLLBACK;
BEGIN; DROP INDEX ix_job_runs_console_payload; DROP INDEX ix_job_runs_console_error; SELECT 'without', pg_temp.bump(4001, 8001); ROLLBACK;
BEGIN; SELECT 'with', pg_temp.bump(8001, 12001); ROLLBACK;
BEGIN; DROP INDEX ix_job_runs_console_payload; DROP INDEX ix_job_runs_console_error; SELECT 'without', pg_temp.bump(12001, 16001); ROLLBACK;
BEGIN; SELECT 'with', pg_temp.bump(16001, 20001); ROLLBACK;
BEGIN; DROP INDEX ix_job_runs_console_payload; DROP INDEX ix_job_runs_console_error; SELECT 'without', pg_temp.bump(20001, 24001); ROLLBACK;
BEGIN; SELECT 'with', pg_temp.bump(24001, 28001); ROLLBACK;
BEGIN; DROP INDEX ix_job_runs_console_payload; DROP INDEX ix_job_runs_console_error; SELECT 'without', pg_temp.bump(28001, 32001); ROLLBACK;
