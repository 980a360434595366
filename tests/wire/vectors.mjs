// Checks every vector of tests/vectors/job_ids.json with jobid.mjs (written from
// docs/wire-protocol.md alone). Prints one line per vector and a summary; exits 1 on a mismatch.
//
//   node tests/wire/vectors.mjs tests/vectors/job_ids.json tests/contracts/schemas
import { readFileSync } from "node:fs";
import { chainId, hashedId, jobId, loadContracts, parse } from "./jobid.mjs";

const [vectorsPath, schemasDir] = process.argv.slice(2);
const vectors = parse(readFileSync(vectorsPath, "utf8"));
const contracts = loadContracts(schemasDir);
let failed = 0;
let checked = 0;

function check(section, name, got, want) {
  checked++;
  const ok = Object.entries(want).every(([k, v]) => v === null || got[k] === v);
  if (!ok) failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${section}: ${name}${ok ? "" : `\n  want ${JSON.stringify(want)}\n  got  ${JSON.stringify(got)}`}`);
}

for (const c of vectors.job_ids) {
  const got = hashedId(c.org_id, c.job_name, c.entity_id, c.stable_part);
  check("job_ids", c.name, { canonical_json: got.json, sha256: got.sha256, job_id: got.jobId }, {
    canonical_json: c.canonical_json,
    sha256: c.sha256,
    job_id: c.job_id,
  });
}
for (const c of vectors.payloads) {
  const got = jobId(contracts, c.job_name, c.payload);
  check("payloads", c.name, { canonical_json: got.json ?? null, job_id: got.jobId }, {
    canonical_json: c.canonical_json,
    job_id: c.job_id,
  });
}
for (const c of vectors.chain) {
  const text = (x) => (typeof x === "object" && x !== null ? x.text : String(x));
  const id = chainId(c.action_type, text(c.chain_id), c.contract, text(c.round_id), c.address);
  check("chain", c.name, { job_id: id }, { job_id: c.job_id });
}
console.log(`${checked - failed} of ${checked} vectors match`);
process.exit(failed ? 1 : 0);
