// Staging a job in the caller's Postgres transaction (the transactional outbox), as the Python
// producers' `outbox.enqueue` does: an outbox event and a STAGED run, written by the caller's own
// connection, so that they commit or roll back with its work. The fleet's relay publishes the
// event once it is committed (`make run` / the scheduler); a rollback leaves no trace.
import { randomUUID } from "node:crypto";

import { SchemaNotMigrated } from "./errors";
import { STAGE_RUN } from "./generated/contracts";
import { prepared } from "./jobid";
import type { Job } from "./jobs";

/** What `stage` needs of a node-postgres client (`pg.Client`, a `PoolClient`) in a transaction. */
export interface SqlLike {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

export interface StageOptions {
  /** The outbox event's type (default: the job name). */
  eventType?: string;
  requestId?: string | null;
  /** Not before this many milliseconds from now. */
  delayMs?: number;
}

export interface Staged {
  /** The outbox event's id. */
  eventId: string;
  jobId: string;
}

const INSERT_EVENT = `
INSERT INTO outbox_events (id, org_id, type, job_name, job_id, payload, request_id, status,
                           attempts, deliver_at)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, 'PENDING', 0,
        CASE WHEN $8::bigint IS NULL THEN NULL ELSE now() + make_interval(secs => $8::bigint / 1000.0) END)`;


/**
 * Validate `payload` (InvalidPayload, before anything is written), then write its outbox event
 * and its STAGED run through `sql`, inside the caller's transaction (BEGIN ... COMMIT is the
 * caller's). SchemaNotMigrated when the fleet's tables are missing.
 */
export async function stage(
  sql: SqlLike,
  job: string | Job,
  payload: Record<string, unknown>,
  options: StageOptions = {},
): Promise<Staged> {
  if (options.delayMs !== undefined && !(options.delayMs >= 0)) throw new RangeError("delayMs must not be negative");
  const { spec, valid, jobId } = prepared(job, payload);
  const eventId = randomUUID();
  const wire = JSON.stringify(valid);
  const requestId = options.requestId ?? null;
  const entity = valid.entity_id ?? valid.slot ?? null;
  try {
    await sql.query(INSERT_EVENT, [
      eventId, valid.org_id, options.eventType ?? spec.name, spec.name, jobId, wire, requestId,
      options.delayMs === undefined ? null : Math.trunc(options.delayMs),
    ]);
    const run: Record<string, unknown> = {
      o: valid.org_id, n: spec.name, j: jobId, q: spec.queue, et: spec.entityType,
      e: entity === null ? null : String(entity), p: wire, r: requestId,
    };
    await sql.query(STAGE_RUN.text, STAGE_RUN.names.map((name) => run[name]));
    await sql.query("SELECT pg_notify('jobfleet_outbox', '')");
  } catch (err) {
    if ((err as { code?: string }).code === "42P01") throw new SchemaNotMigrated(err);
    throw err;
  }
  return { eventId, jobId };
}
