// Job ids: every vector of tests/vectors/job_ids.json, and random payloads of every job against
// the Python producers (property test: fast-check).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import fc from "fast-check";

import { canonical, chainJobId, jobId, jobs, InvalidPayload, UnknownJob } from "../src";
import { pythonFloatRepr } from "../src/canonical";
import { ROOT, pythonJobIds } from "./support";

const VECTORS = JSON.parse(readFileSync(join(ROOT, "tests", "vectors", "job_ids.json"), "utf8"));

test("every payload vector: the same job id as Python", () => {
  const covered = new Set<string>();
  for (const c of VECTORS.payloads) {
    assert.equal(jobId(c.job_name, c.payload), c.job_id, c.name);
    covered.add(c.job_name);
  }
  assert.deepEqual([...covered].sort(), jobs().map((j) => j.name).sort(), "a job without a vector");
});

test("every canonical JSON vector", () => {
  for (const c of VECTORS.job_ids) {
    const floats = /\d\.\d|\de[+-]/.test(c.canonical_json);
    if (!floats) {
      const text = canonical(c.stable_part);
      assert.equal(text, c.canonical_json, c.name);
      assert.equal(createHash("sha256").update(text, "utf8").digest("hex"), c.sha256, c.name);
      continue;
    }
    // Numbers as Python writes them: each member's text, ints (any size) and floats.
    const members = [...c.canonical_json.matchAll(/"(\w+)":(-?[\d.e+-]+)/g)];
    assert.ok(members.length >= 8, c.name);
    for (const [, key, text] of members) {
      const written = /[.eE]/.test(text) ? pythonFloatRepr(Number(text)) : canonical(BigInt(text));
      assert.equal(written, text, `${c.name}: ${key}`);
    }
  }
});

test("every chain vector", () => {
  for (const c of VECTORS.chain) {
    assert.equal(chainJobId(c.action_type, c.chain_id, c.contract, c.round_id, c.address), c.job_id, c.name);
  }
});

test("a refused payload names each field; an unknown job is named", () => {
  assert.throws(
    () => jobId("export:build", { org_id: "nope", entity_id: "0d9e4c1a-7b2f-4e8a-b6c3-5a4f3e2d1c0b", type: "X", params: { format: "DOCX" } }),
    (err: unknown) => {
      assert.ok(err instanceof InvalidPayload);
      const paths = err.issues.map((i) => i.path).sort();
      assert.deepEqual(paths, ["org_id", "params.format", "requested_by", "type"]);
      return true;
    },
  );
  assert.throws(() => jobId("email:sned", {}), UnknownJob);
});

// -- random payloads -------------------------------------------------------------------------

const uuid = fc.uuid().chain((u) => fc.constantFrom(u, u.toUpperCase(), u.replace(/-/g, ""), `{${u}}`));
const free = fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 });
const address = fc.stringMatching(/^0x[0-9a-fA-F]{40}$/);
const org = fc.uuid();
const ENUMS = {
  exportType: ["ACCOUNTING", "EMAILS", "JOB_RUNS", "LOTTERY_TICKETS", "LOTTERY_WINNERS"],
  format: ["CSV", "XLSX", "PDF", "ZIP"],
  task: ["summarize", "extract", "classify", "embed"],
};
const date = fc.date({ min: new Date("2000-01-01"), max: new Date("2099-12-31"), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10));

const PAYLOADS: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  "email:send": fc.record(
    {
      org_id: org,
      entity_id: uuid,
      template_key: fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,20}$/),
      recipient_email: fc.tuple(fc.stringMatching(/^[a-zA-Z0-9._+-]{1,12}$/), fc.constantFrom("Example.COM", "example.org", "Sub.EXAMPLE.net")).map(([l, d]) => `${l}@${d}`),
      recipient_name: fc.option(fc.stringMatching(/^[^\r\n]{0,30}$/), { nil: undefined }),
      variables: free,
      lang: fc.constantFrom("fr", "en"),
    },
    { requiredKeys: ["org_id", "entity_id", "template_key", "recipient_email"] },
  ),
  "email-seq:run_due": fc.record({ org_id: org, slot: fc.stringMatching(/^[0-9T:Z-]{1,20}$/) }),
  "ai:run": fc.record(
    { org_id: org, entity_id: uuid, task: fc.constantFrom(...ENUMS.task), input: fc.oneof(fc.string(), fc.array(fc.string())), params: free },
    { requiredKeys: ["org_id", "entity_id", "task", "input"] },
  ),
  "export:build": fc.record(
    {
      org_id: org,
      entity_id: uuid,
      requested_by: uuid,
      type: fc.constantFrom(...ENUMS.exportType),
      params: fc.record(
        {
          format: fc.constantFrom(...ENUMS.format),
          bom: fc.boolean(),
          filters: free,
          date_range: fc.option(fc.record({ start: date, end: date }), { nil: null }),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ["org_id", "entity_id", "requested_by", "type"] },
  ),
  "doc:ingest": fc.record({ org_id: org, entity_id: uuid, file_object_id: uuid }),
  "doc:ocr": fc.record({ org_id: org, entity_id: uuid, page: fc.integer({ min: 1, max: 10_000 }) }),
  "doc:extract_structured": fc.record({ org_id: org, entity_id: uuid, schema: fc.string({ minLength: 1, maxLength: 64 }) }),
  "doc:index_search": fc.record({ org_id: org, entity_id: uuid }),
};
for (const action of ["chain:mint_badge", "chain:claim_prize", "chain:claim_refund"]) {
  const field = { "chain:mint_badge": "player", "chain:claim_prize": "winner", "chain:claim_refund": "payer" }[action]!;
  PAYLOADS[action] = fc.record({
    org_id: org,
    chain_id: fc.integer({ min: 1, max: 2 ** 40 }),
    contract: address,
    round_id: fc.integer({ min: 0, max: 2 ** 40 }),
    [field]: address,
  });
}

test("random payloads of every job: the same id as Python (and both refuse the same ones)", () => {
  assert.deepEqual(Object.keys(PAYLOADS).sort(), jobs().map((j) => j.name).sort(), "a job without a generator");
  const cases = Object.entries(PAYLOADS).flatMap(([job, arb]) =>
    fc.sample(arb, { numRuns: 60, seed: Number(process.env.FC_SEED ?? 4242) }).map((payload) => ({ job, payload })),
  );
  const theirs = pythonJobIds(cases);
  let compared = 0;
  cases.forEach((c, i) => {
    let ours: string | { error: string };
    try {
      ours = jobId(c.job, c.payload);
    } catch (err) {
      ours = { error: (err as Error).name };
    }
    if (typeof theirs[i] === "string" || typeof ours === "string") {
      assert.equal(ours, theirs[i], `${c.job} ${JSON.stringify(c.payload)}`);
      compared++;
    }
  });
  assert.ok(compared >= cases.length * 0.9, `only ${compared} of ${cases.length} payloads were accepted`);
});
