// Job ids (docs/wire-protocol.md §1), derived from the work as the Python producers derive them.
import { createHash } from "node:crypto";

import { canonical } from "./canonical";
import { type Job, job as lookup, validate } from "./jobs";

/** `{TYPE}-{chain_id}-{contract}-{round_id}-{address}`; chain id 0 (a v1 payload) keeps its v1 id. */
export function chainJobId(actionType: string, chainId: number, contract: string, roundId: number, address: string): string {
  if (chainId === 0) return `${actionType}-${roundId}-${address.toLowerCase()}`;
  return `${actionType}-${chainId}-${contract.toLowerCase()}-${roundId}-${address.toLowerCase()}`;
}

/** The id of a payload that is already validated (`validate`). */
export function jobIdOf(spec: Job, payload: Record<string, unknown>): string {
  const rule = spec.idRule;
  if (rule.form === "chain") {
    const chainId = payload.chain_id === undefined ? 0 : Number(payload.chain_id);
    const contract = String(payload.contract ?? "0x" + "00".repeat(20));
    return chainJobId(rule.action_type, chainId, contract, Number(payload.round_id), String(payload[rule.address]));
  }
  if (rule.form !== "hash") throw new Error(`${spec.name}: its id rule (${rule.form}) is only known to Python`);
  const stable: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(payload)) {
    if (key !== "v" && (rule.hashed === null || rule.hashed.includes(key))) stable[key] = value;
  }
  const digest = createHash("sha256").update(canonical(stable), "utf8").digest("hex").slice(0, 16);
  return `${payload.org_id}:${spec.name}:${payload[rule.entity]}:${digest}`;
}

/** A payload ready to send or stage: its job, the payload as the worker sees it, its id. */
export function prepared(job: string | Job, payload: Record<string, unknown>) {
  const spec = lookup(job);
  const valid = validate(spec, payload);
  return { spec, valid, jobId: jobIdOf(spec, valid) };
}

/** The id the fleet gives `payload` of `job` (a name such as `email:send`, or a `Job`). */
export function jobId(job: string | Job, payload: Record<string, unknown>): string {
  return prepared(job, payload).jobId;
}
