-- The run of a staged job, in the caller's transaction (shared/outbox/stage.py; the Node.js kit
-- stages with this same statement: clients/node, `npm run generate`). A run that already exists
-- keeps its state (the job id is a duplicate: the relay's send will answer so), except a
-- CANCELED one, staged again. Its partition day: the existing row's, or today (migration
-- 0020_partitioned_runs).
INSERT INTO job_runs (org_id, job_name, job_id, queue, status, entity_type, entity_id, payload,
                      attempt, request_id, queued_at, created_on)
VALUES (:o, :n, :j, :q, 'STAGED', :et, :e, CAST(:p AS jsonb), 0, :r, now(),
        jobfleet_run_created_on(:j))
ON CONFLICT (job_id, created_on) DO UPDATE
   SET status = 'STAGED', payload = EXCLUDED.payload, request_id = EXCLUDED.request_id,
       queued_at = EXCLUDED.queued_at, attempt = 0, cancel_requested = FALSE, error_code = NULL,
       error = NULL, result = NULL, started_at = NULL, finished_at = NULL, message_id = NULL,
       next_retry_at = NULL
 WHERE job_runs.status = 'CANCELED'
