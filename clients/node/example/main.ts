// The Node.js example product API (NestJS): `node dist/example/main.js`, settings from its
// environment (example/config.ts). It creates its own table (`product_requests`) at start; the
// fleet's tables come from `fleet db upgrade`.
import "reflect-metadata";

import { NestFactory } from "@nestjs/core";
import { Pool } from "pg";

import { AppModule } from "./app.module";
import { config } from "./config";

const PRODUCT_TABLE = `CREATE TABLE IF NOT EXISTS product_requests (
  id uuid PRIMARY KEY, org_id uuid NOT NULL, kind text NOT NULL, body jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now())`;

async function main(): Promise<void> {
  const settings = config();
  const pool = new Pool({ connectionString: settings.databaseUrl, max: 1 });
  await pool.query(PRODUCT_TABLE);
  await pool.end();
  const app = await NestFactory.create(AppModule, { logger: ["error", "warn"] });
  app.enableShutdownHooks();
  await app.listen(settings.port, "127.0.0.1");
  console.log(`example API listening on http://127.0.0.1:${settings.port}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
