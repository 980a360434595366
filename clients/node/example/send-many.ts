// Sends payloads with the kit, all at once, several times each (a concurrency test's Node side):
//   node dist/example/send-many.js REDIS_URL NAMESPACE WINDOW_MS COPIES < [{"job", "payload"}...]
// Prints one line of JSON: every send's result, in the order of the input (copies together).
import { readFileSync } from "node:fs";

import Redis from "ioredis";

import { send } from "../src";

async function main(): Promise<void> {
  const [url, namespace, windowMs, copies] = process.argv.slice(2);
  const cases: { job: string; payload: Record<string, unknown> }[] = JSON.parse(readFileSync(0, "utf8"));
  const redis = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: true });
  try {
    const sends = cases.flatMap((c) =>
      Array.from({ length: Number(copies) }, () => send(redis, c.job, c.payload, { namespace, dedupWindowMs: Number(windowMs) })),
    );
    console.log(JSON.stringify(await Promise.all(sends)));
  } finally {
    redis.disconnect();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
