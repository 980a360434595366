// One route per domain the product sends work to: validate the request, then in ONE Postgres
// transaction write the product's own row and stage the fleet's job (the outbox), commit, and
// answer 202 with the job id; the fleet's relay publishes the job once it is committed. Job
// status comes from the fleet's job-status API.
import { randomUUID } from "node:crypto";

import { Body, Controller, Get, Headers, HttpCode, HttpException, Inject, Param, Post } from "@nestjs/common";
import type { Pool } from "pg";
import { z } from "zod";

import { InvalidPayload, SchemaNotMigrated, stage } from "../src";
import type { Config } from "./config";

export const POOL = "POOL";
export const CONFIG = "CONFIG";

const EmailRequest = z.object({
  template_key: z.string(),
  recipient_email: z.string(),
  recipient_name: z.string().optional(),
  variables: z.record(z.string(), z.unknown()).default({}),
});
const ExportRequest = z.object({ type: z.string(), params: z.record(z.string(), z.unknown()).optional() });
const AiRequest = z.object({ task: z.string(), input: z.union([z.string(), z.array(z.string())]) });
const BadgeRequest = z.object({ chain_id: z.number().int(), contract: z.string(), round_id: z.number().int(), player: z.string() });

@Controller()
export class JobsController {
  constructor(
    @Inject(POOL) private readonly pool: Pool,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  private org(authorization: string | undefined): string {
    const org = this.config.keys[(authorization ?? "").replace(/^Bearer /, "")];
    if (!org) throw new HttpException({ title: "an API key is required" }, 401);
    return org;
  }

  /** BEGIN; the product's row; stage the job; COMMIT. A failure rolls both back. */
  private async commit(org: string, kind: string, job: string, payload: Record<string, unknown>) {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query(
        "INSERT INTO product_requests (id, org_id, kind, body) VALUES ($1, $2, $3, $4::jsonb)",
        [payload.entity_id ?? randomUUID(), org, kind, JSON.stringify(payload)],
      );
      const staged = await stage(client, job, { org_id: org, ...payload });
      await client.query("COMMIT");
      return { job_id: staged.jobId, status_url: `/jobs/${encodeURIComponent(staged.jobId)}` };
    } catch (err) {
      await client.query("ROLLBACK");
      if (err instanceof InvalidPayload) {
        throw new HttpException({ title: err.message, issues: err.issues }, 422);
      }
      if (err instanceof SchemaNotMigrated) throw new HttpException({ title: err.message }, 503);
      throw err;
    } finally {
      client.release();
    }
  }

  private parse<T>(schema: z.ZodType<T>, body: unknown): T {
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
      throw new HttpException({ title: "invalid request", issues }, 422);
    }
    return parsed.data;
  }

  @Post("emails")
  @HttpCode(202)
  async email(@Headers("authorization") auth: string | undefined, @Body() body: unknown) {
    const req = this.parse(EmailRequest, body);
    return this.commit(this.org(auth), "email", "email:send", { entity_id: randomUUID(), ...req });
  }

  @Post("exports")
  @HttpCode(202)
  async export(@Headers("authorization") auth: string | undefined, @Body() body: unknown) {
    const req = this.parse(ExportRequest, body);
    // The requesting user: the example has none of its own, so the org stands for it.
    const org = this.org(auth);
    return this.commit(org, "export", "export:build", { entity_id: randomUUID(), requested_by: org, ...req });
  }

  @Post("ai-tasks")
  @HttpCode(202)
  async ai(@Headers("authorization") auth: string | undefined, @Body() body: unknown) {
    const req = this.parse(AiRequest, body);
    return this.commit(this.org(auth), "ai", "ai:run", { entity_id: randomUUID(), ...req });
  }

  @Post("badges")
  @HttpCode(202)
  async badge(@Headers("authorization") auth: string | undefined, @Body() body: unknown) {
    const req = this.parse(BadgeRequest, body);
    return this.commit(this.org(auth), "chain", "chain:mint_badge", req);
  }

  /** The job's status, from the fleet's job-status API, for the caller's org only. */
  @Get("jobs/:id")
  async status(@Headers("authorization") auth: string | undefined, @Param("id") id: string) {
    const answer = await fetch(`${this.config.jobApiUrl}/jobs/${encodeURIComponent(id)}`, {
      headers: { authorization: `Bearer ${this.config.jobApiToken}`, "x-jobfleet-org": this.org(auth) },
    });
    const body = (await answer.json()) as Record<string, unknown>;
    if (!answer.ok) throw new HttpException(body, answer.status);
    return body;
  }
}
