// The fleet's jobs (generated from its contracts) and the validation of a payload against one.
import type { z } from "zod";

import { CONTRACTS, type IdRule } from "./generated/contracts";
import { InvalidPayload, UnknownJob } from "./errors";
import { RULES } from "./rules";

export type JobName = keyof typeof CONTRACTS;

/** A job as the fleet declares it. */
export interface Job {
  name: string;
  queue: string;
  entityType: string | null;
  latest: number;
  idRule: IdRule;
  versions: Record<number, z.ZodType>;
}

/** The payload a producer writes for job `J` (its latest version; defaults may be omitted). */
export type PayloadOf<J extends JobName> = z.input<
  (typeof CONTRACTS)[J]["versions"][(typeof CONTRACTS)[J]["latest"] & keyof (typeof CONTRACTS)[J]["versions"]]
>;

/** A job by name (`email:send`), or the job itself. */
export function job(name: string | Job): Job {
  if (typeof name !== "string") return name;
  const found = (CONTRACTS as Record<string, Job>)[name];
  if (!found) {
    throw new UnknownJob(`unknown job ${JSON.stringify(name)}; known: ${Object.keys(CONTRACTS).join(", ")}`);
  }
  return found;
}

/** Every job of the fleet. */
export function jobs(): Job[] {
  return Object.values(CONTRACTS as Record<string, Job>);
}

/**
 * The payload as the worker will see it: validated against its version (`v`, default the
 * latest), every default filled in, UUIDs and addresses in their canonical text.
 * Throws `InvalidPayload` with the path of each refused field.
 */
export function validate(spec: Job, payload: Record<string, unknown>): Record<string, unknown> {
  const version = payload.v === undefined ? spec.latest : payload.v;
  const schema = typeof version === "number" ? spec.versions[version] : undefined;
  if (!schema) {
    throw new InvalidPayload(spec.name, [
      { path: "v", message: `unknown version ${JSON.stringify(version)}; known: ${Object.keys(spec.versions).join(", ")}` },
    ]);
  }
  const parsed = schema.safeParse({ ...payload, v: version });
  if (!parsed.success) {
    throw new InvalidPayload(
      spec.name,
      parsed.error.issues.map((issue) => ({ path: issue.path.map(String).join("."), message: issue.message })),
    );
  }
  const data = parsed.data as Record<string, unknown>;
  const refused = RULES[spec.name]?.(data) ?? [];
  if (refused.length) throw new InvalidPayload(spec.name, refused);
  return data;
}
