// Sending a job now: claim its id and enqueue its message in one atomic step, with the script
// the Python producers call (docs/wire-protocol.md §2-3). A duplicate enqueues nothing.
import { randomUUID } from "node:crypto";

import { ENQUEUE_ONCE_LUA } from "./generated/contracts";
import { BrokerUnavailable } from "./errors";
import { prepared } from "./jobid";
import type { Job } from "./jobs";

/** What `send` needs of a Redis client (ioredis' `Redis` has it). */
export interface RedisLike {
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
}

export interface SendOptions {
  /** Not before this many milliseconds from now (the job's delayed queue). */
  delayMs?: number;
  /** The producing request's id, shown with the run. */
  requestId?: string | null;
  /** The fleet's BROKER_NAMESPACE (default `dramatiq`). */
  namespace?: string;
  /** The fleet's dedup window in ms (its DEDUP_WINDOW_S; default 1 day). */
  dedupWindowMs?: number;
  /** Its priority in its queue, fleet-wide (§3: the lanes); default `default`. */
  priority?: Priority;
}

/** The closed set of priorities (docs/kernel.md, "Fair share, limits and priorities"). */
export type Priority = "high" | "default" | "low";
export const PRIORITIES: readonly Priority[] = ["high", "default", "low"];

export interface SendResult {
  jobId: string;
  /** The message that holds the job id: this send's, or the earlier one's for a duplicate. */
  messageId: string;
  duplicate: boolean;
}

export const DEFAULT_DEDUP_WINDOW_MS = 24 * 3600 * 1000;

/** The message of a send (§2): Dramatiq's layout, the payload as its one positional argument. */
export function message(
  spec: Job,
  payload: Record<string, unknown>,
  jobId: string,
  options: { delayMs?: number; requestId?: string | null; now?: number; priority?: Priority } = {},
): { queue: string; messageId: string; redisMessageId: string; data: string } {
  const now = options.now ?? Date.now();
  const delayed = options.delayMs !== undefined && options.delayMs > 0;
  const queue = delayed ? `${spec.queue}.DQ` : spec.queue;
  const messageId = randomUUID();
  const redisMessageId = randomUUID();
  const entity = payload.entity_id ?? payload.slot ?? "";
  const body = {
    queue_name: queue,
    actor_name: spec.name,
    args: [payload],
    kwargs: {},
    options: {
      job_id: jobId,
      org_id: payload.org_id,
      entity_type: spec.entityType,
      entity_id: String(entity),
      request_id: options.requestId ?? null,
      attempt: 1,
      sent_at: now / 1000,
      redis_message_id: redisMessageId,
      priority: options.priority ?? "default",
      ...(delayed ? { eta: now + Math.trunc(options.delayMs!) } : {}),
    },
    message_id: messageId,
    message_timestamp: now,
  };
  return { queue, messageId, redisMessageId, data: JSON.stringify(body) };
}

/**
 * Validate `payload` (InvalidPayload), derive its job id, and enqueue it unless that id is
 * already claimed (then `duplicate` is true and nothing is enqueued). BrokerUnavailable when
 * Redis does not answer: nothing was enqueued, and sending again is safe. `redis`: the fleet's
 * Redis, or, when the fleet shards its queues (REDIS_QUEUE_URLS), `(queue) => client` giving the
 * client of each queue's server.
 */
export async function send(
  redis: RedisLike | ((queue: string) => RedisLike),
  job: string | Job,
  payload: Record<string, unknown>,
  options: SendOptions = {},
): Promise<SendResult> {
  if (options.delayMs !== undefined && !(options.delayMs >= 0)) throw new RangeError("delayMs must not be negative");
  if (options.priority !== undefined && !PRIORITIES.includes(options.priority)) {
    throw new RangeError(`priority must be one of ${PRIORITIES.join(", ")}`);
  }
  const { spec, valid, jobId } = prepared(job, payload);
  const ns = options.namespace ?? "dramatiq";
  const msg = message(spec, valid, jobId, options);
  // A fleet that shards its queues over several Redis primaries (REDIS_QUEUE_URLS): the claim and
  // the message go to the server of the job's queue (docs/wire-protocol.md §3).
  const client = typeof redis === "function" ? redis(spec.queue) : redis;
  let holder: unknown;
  try {
    holder = await client.eval(
      ENQUEUE_ONCE_LUA,
      4,
      `${ns}:jobfleet:job-id:${jobId}`,
      `${ns}:${msg.queue}.msgs`,
      `${ns}:${msg.queue}`,
      `${ns}:${msg.queue}.wake`,
      msg.messageId,
      String(options.dedupWindowMs ?? DEFAULT_DEDUP_WINDOW_MS),
      msg.redisMessageId,
      msg.data,
      // Its lane: its priority and org (a delayed message's is taken when it comes due).
      options.priority ?? "default",
      String(valid.org_id),
    );
  } catch (err) {
    throw new BrokerUnavailable(jobId, err);
  }
  if (holder === null || holder === undefined || holder === 0) {
    return { jobId, messageId: msg.messageId, duplicate: false };
  }
  return { jobId, messageId: String(holder), duplicate: true };
}
