// send and stage without a fleet: the message layout, and the errors of a down Redis and of a
// database without the fleet's tables.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";

import Redis from "ioredis";

import { BrokerUnavailable, InvalidPayload, SchemaNotMigrated, job, jobId, send, stage } from "../src";
import { message } from "../src/send";

const ORG = "6f1c2a3e-8d4b-4c6f-9a1e-2b3c4d5e6f70";
const EMAIL = { org_id: ORG, entity_id: "0d9e4c1a-7b2f-4e8a-b6c3-5a4f3e2d1c0b", template_key: "welcome", recipient_email: "ana@example.com" };

test("a delayed message goes to the delayed queue with its eta; options as docs/wire-protocol.md §2", () => {
  const spec = job("email:send");
  const msg = message(spec, EMAIL, "the-id", { delayMs: 5000, now: 1_000_000 });
  const body = JSON.parse(msg.data);
  assert.equal(msg.queue, "email.DQ");
  assert.deepEqual(Object.keys(body).sort(), ["actor_name", "args", "kwargs", "message_id", "message_timestamp", "options", "queue_name"]);
  assert.equal(body.actor_name, "email:send");
  assert.deepEqual(body.args, [EMAIL]);
  assert.equal(body.options.eta, 1_005_000);
  assert.equal(body.options.redis_message_id, msg.redisMessageId);
  assert.equal(body.options.entity_type, "scheduled_email");
  assert.equal(body.options.attempt, 1);
});

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test("Redis down: BrokerUnavailable with the job id, after nothing was enqueued", async () => {
  const redis = new Redis(await closedPort(), "127.0.0.1", { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  redis.on("error", () => {});
  await assert.rejects(send(redis, "email:send", EMAIL), (err: unknown) => {
    assert.ok(err instanceof BrokerUnavailable);
    assert.equal(err.jobId, jobId("email:send", EMAIL));
    return true;
  });
  redis.disconnect();
});

test("an invalid payload is refused before Redis or Postgres is asked anything", async () => {
  const asked: string[] = [];
  const sql = { query: async (text: string) => void asked.push(text) };
  const redis = { eval: async () => void asked.push("eval") };
  await assert.rejects(stage(sql, "email:send", { ...EMAIL, recipient_email: "nope" }), InvalidPayload);
  await assert.rejects(send(redis, "email:send", { ...EMAIL, template_key: "" }), InvalidPayload);
  assert.deepEqual(asked, []);
});

test("sharded queues: the claim and the message go to the client of the job's queue", async () => {
  const asked: string[] = [];
  const on = (server: string) => ({ eval: async (...args: unknown[]) => void asked.push(`${server} ${String(args[3])}`) });
  const servers: Record<string, ReturnType<typeof on>> = { email: on("b") };
  const route = (queue: string) => servers[queue] ?? on("home");
  await send(route, "email:send", EMAIL);
  await send(route, "email:send", EMAIL, { delayMs: 1000 });
  assert.deepEqual(asked, ["b dramatiq:email.msgs", "b dramatiq:email.DQ.msgs"]);
});

test("no fleet tables: SchemaNotMigrated", async () => {
  const sql = {
    query: async () => {
      throw Object.assign(new Error('relation "outbox_events" does not exist'), { code: "42P01" });
    },
  };
  await assert.rejects(stage(sql, "email:send", EMAIL), (err: unknown) => err instanceof SchemaNotMigrated && /fleet db upgrade/.test(err.message));
});
