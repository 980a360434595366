// Job ids as docs/wire-protocol.md §1 states them, written from that page alone: Node.js
// builtins only, none of jobfleet's code. Used by vectors.mjs (every vector of
// tests/vectors/job_ids.json) and producer.mjs (sends that deduplicate against Python).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";

// A JSON number kept as its text: JSON.parse turns 1.0 into 1 and loses digits of big integers.
export class Num {
  constructor(text) {
    this.text = text;
  }
}

// A JSON reader that keeps every number as written (a Num).
export function parse(text) {
  let i = 0;
  const ws = () => {
    while (" \t\r\n".includes(text[i]) && i < text.length) i++;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const out = {};
      ws();
      if (text[i] === "}") return i++, out;
      for (;;) {
        ws();
        const key = string();
        ws();
        i++; // :
        out[key] = value();
        ws();
        if (text[i++] === "}") return out;
      }
    }
    if (c === "[") {
      i++;
      const out = [];
      ws();
      if (text[i] === "]") return i++, out;
      for (;;) {
        out.push(value());
        ws();
        if (text[i++] === "]") return out;
      }
    }
    if (c === '"') return string();
    if (text.startsWith("true", i)) return (i += 4), true;
    if (text.startsWith("false", i)) return (i += 5), false;
    if (text.startsWith("null", i)) return (i += 4), null;
    const m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m) throw new Error(`bad JSON at ${i}`);
    i += m[0].length;
    return new Num(m[0]);
  };
  const string = () => {
    let j = i + 1;
    while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
    const raw = text.slice(i, j + 1);
    i = j + 1;
    return JSON.parse(raw);
  };
  const out = value();
  return out;
}

// Canonical JSON (§1): keys by code point, no whitespace, non-ASCII as itself; numbers as the
// payload wrote them (Python's repr for floats); strings escaped as JSON.stringify does, which
// is the escaping §1 lists (", \, control characters; / DEL U+2028 U+2029 as themselves).
export function canonical(value) {
  if (value instanceof Num) return value.text;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error("NaN and infinities are refused");
    if (Number.isInteger(value)) return String(value);
    throw new Error("a float must be given as a Num (its Python text)");
  }
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort(byCodePoint);
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
  }
  return JSON.stringify(value);
}

function byCodePoint(a, b) {
  const x = [...a].map((c) => c.codePointAt(0));
  const y = [...b].map((c) => c.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

export function hashedId(orgId, jobName, entityId, stablePart) {
  const json = canonical(stablePart);
  const sha256 = createHash("sha256").update(json, "utf8").digest("hex");
  return { json, sha256, jobId: `${orgId}:${jobName}:${entityId}:${sha256.slice(0, 16)}` };
}

// The contracts as `fleet contracts export` writes them (tests/contracts/schemas/).
export function loadContracts(dir) {
  const index = JSON.parse(readFileSync(join(dir, "index.json"), "utf8"));
  const schemas = {};
  for (const [job, entry] of Object.entries(index)) {
    schemas[job] = {};
    for (const [v, file] of Object.entries(entry.files)) {
      schemas[job][v] = JSON.parse(readFileSync(join(dir, file), "utf8"));
    }
  }
  return { index, schemas };
}

const UUID = /^\{?([0-9a-fA-F]{8})-?([0-9a-fA-F]{4})-?([0-9a-fA-F]{4})-?([0-9a-fA-F]{4})-?([0-9a-fA-F]{12})\}?$/;

// The payload as the worker sees it (§1): every default the schema declares filled in,
// recursively; UUIDs in their canonical lower-case form.
export function fill(schema, value, root = schema) {
  if (schema.$ref) return fill(resolve(root, schema.$ref), value, root);
  if (schema.anyOf) {
    if (value === null) return null;
    const branch = schema.anyOf.find((s) => s.type !== "null") ?? schema.anyOf[0];
    return fill(branch, value, root);
  }
  if (schema.format === "uuid" && typeof value === "string") {
    const m = UUID.exec(value);
    if (!m) throw new Error(`not a UUID: ${value}`);
    return m.slice(1).join("-").toLowerCase();
  }
  if (schema.type === "object" && value !== null && typeof value === "object") {
    const out = { ...value };
    for (const [key, prop] of Object.entries(schema.properties ?? {})) {
      if (!(key in out) && "default" in prop) out[key] = structuredClone(prop.default);
      if (key in out && out[key] !== null) out[key] = fill(prop, out[key], root);
    }
    return out;
  }
  return value;
}

// A chain action's id (§1, "Chain actions"): chain id 0 is a v1 payload, which keeps its v1 id.
export function chainId(actionType, chain, contract, roundId, address) {
  const addr = String(address).toLowerCase();
  if (String(chain) === "0") return `${actionType}-${roundId}-${addr}`;
  return `${actionType}-${chain}-${String(contract).toLowerCase()}-${roundId}-${addr}`;
}

function resolve(root, ref) {
  return ref.split("/").slice(1).reduce((node, part) => node[part], root);
}

// The job id of a payload as a producer sends it (§1), from the exported contracts.
export function jobId(contracts, jobName, payload) {
  const entry = contracts.index[jobName];
  if (!entry) throw new Error(`unknown job ${jobName}`);
  const version = String(payload.v instanceof Num ? payload.v.text : (payload.v ?? entry.latest));
  const schema = contracts.schemas[jobName][version];
  const filled = fill(schema, { ...payload, v: payload.v ?? entry.latest });
  const rule = entry.job_id;
  if (rule.form === "chain") {
    const text = (x) => (x instanceof Num ? x.text : String(x));
    const chain = filled.chain_id === undefined ? "0" : text(filled.chain_id);
    const id = chainId(rule.action_type, chain, filled.contract, text(filled.round_id), filled[rule.address]);
    return { jobId: id, filled };
  }
  const stable = {};
  for (const [key, value] of Object.entries(filled)) {
    if (key === "v") continue;
    if (rule.hashed === null || rule.hashed.includes(key)) stable[key] = value;
  }
  const entity = filled[rule.entity];
  return { ...hashedId(filled.org_id, jobName, entity, stable), stable, filled };
}
