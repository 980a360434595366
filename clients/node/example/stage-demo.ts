// Stages two jobs with the kit through node-postgres: one in a transaction that rolls back, one
// in a transaction that commits (a test's Node side):
//   node dist/example/stage-demo.js DATABASE_URL < {"rolled_back": {job, payload}, "committed": {...}}
// Prints {"rolled_back": jobId, "committed": jobId}.
import { readFileSync } from "node:fs";

import { Client } from "pg";

import { stage } from "../src";

async function main(): Promise<void> {
  const [url] = process.argv.slice(2);
  const input = JSON.parse(readFileSync(0, "utf8"));
  const client = new Client({ connectionString: url.replace(/^postgresql\+\w+:/, "postgresql:") });
  await client.connect();
  try {
    await client.query("BEGIN");
    const lost = await stage(client, input.rolled_back.job, input.rolled_back.payload);
    await client.query("ROLLBACK");
    await client.query("BEGIN");
    const kept = await stage(client, input.committed.job, input.committed.payload);
    await client.query("COMMIT");
    console.log(JSON.stringify({ rolled_back: lost.jobId, committed: kept.jobId }));
  } finally {
    await client.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
