// Writes src/generated/contracts.ts from the fleet's own contracts: the JSON Schemas that
// `fleet contracts export` writes (tests/contracts/schemas/, one file per job and version, and
// index.json: queues, entity types, id rules) and the claim-and-enqueue script every producer
// calls (shared/broker/lua/enqueue_once.lua). Zod schemas, one per job version.
//
//   npm run generate            rewrite src/generated/contracts.ts
//   npm run check               exit 1 when it is out of date (CI: `make lint`)
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const PACKAGE = join(HERE, "..");
const ROOT = join(PACKAGE, "..", "..");
// `--schemas DIR`: another export (a test checks the contracts as Python declares them now).
const at = process.argv.indexOf("--schemas");
const SCHEMAS = at > 0 ? process.argv[at + 1] : join(ROOT, "tests", "contracts", "schemas");
const LUA = join(ROOT, "shared", "broker", "lua", "enqueue_once.lua");
const STAGE_RUN = join(ROOT, "shared", "outbox", "stage_run.sql");
const OUT = join(PACKAGE, "src", "generated", "contracts.ts");
const COMMAND = "npm run generate --prefix clients/node";

const lit = (value) => JSON.stringify(value);

// One JSON Schema node -> Zod source. `defs`: the names of the document's $defs.
function zod(node, defs) {
  let out;
  if (node.$ref) {
    const name = node.$ref.split("/").pop();
    if (!defs.has(name)) throw new Error(`unresolved $ref ${node.$ref}`);
    out = `z.lazy(() => def_${name})`;
  } else if (node.anyOf) {
    const branches = node.anyOf.filter((b) => b.type !== "null");
    const nullable = branches.length < node.anyOf.length;
    out = branches.length === 1 ? zod(branches[0], defs) : `z.union([${branches.map((b) => zod(b, defs)).join(", ")}])`;
    if (nullable) out += ".nullable()";
  } else if ("const" in node) {
    out = `z.literal(${lit(node.const)})`;
  } else if (node.enum) {
    out = `z.enum(${lit(node.enum)})`;
    if (node.type === "string") out += stringChecks(node, { enum: true });
  } else if (node.type === "string") {
    if (node.format === "uuid") out = "uuid()";
    else if (node.format === "email") out = "email()";
    else if (node.format === "date") out = "isoDate()";
    else if (node.format) throw new Error(`format ${node.format} has no Zod counterpart here`);
    else out = "z.string()";
    out += stringChecks(node, {});
  } else if (node.type === "integer") {
    out = "z.number().int()";
    if ("minimum" in node) out += `.gte(${node.minimum})`;
    if ("maximum" in node) out += `.lte(${node.maximum})`;
  } else if (node.type === "number") {
    out = "z.number()";
    if ("minimum" in node) out += `.gte(${node.minimum})`;
    if ("maximum" in node) out += `.lte(${node.maximum})`;
  } else if (node.type === "boolean") {
    out = "z.boolean()";
  } else if (node.type === "array") {
    out = `z.array(${node.items ? zod(node.items, defs) : "z.unknown()"})`;
  } else if (node.type === "object" || node.properties) {
    const props = node.properties ?? {};
    if (Object.keys(props).length === 0) {
      out = "z.record(z.string(), z.unknown())";
    } else {
      const required = new Set(node.required ?? []);
      const fields = Object.entries(props).map(([key, prop]) => {
        let field = zod(prop, defs);
        if (!required.has(key) && !("default" in prop)) field += ".optional()";
        return `${lit(key)}: ${field}`;
      });
      const kind = node.additionalProperties === false ? "z.strictObject" : "z.looseObject";
      out = `${kind}({ ${fields.join(", ")} })`;
    }
  } else if (node.type === "null") {
    out = "z.null()";
  } else if (Object.keys(node).filter((k) => !["title", "description", "default"].includes(k)).length === 0) {
    out = "z.unknown()";
  } else {
    throw new Error(`no Zod counterpart for ${lit(node)}`);
  }
  if ("default" in node) {
    // An object or array: a fresh copy per parse, never shared between two payloads.
    const fresh = node.default !== null && typeof node.default === "object";
    out += fresh ? `.default(() => (${lit(node.default)}))` : `.default(${lit(node.default)})`;
  }
  return out;
}

function stringChecks(node, { enum: isEnum }) {
  if (isEnum) return "";
  let out = "";
  if ("minLength" in node) out += `.min(${node.minLength})`;
  if ("maxLength" in node) out += `.max(${node.maxLength})`;
  if (node.pattern) out += `.regex(new RegExp(${lit(node.pattern)}, "u"))`;
  return out;
}

// The Python statement's named parameters (`:org`) as node-postgres' positional ones ($1), in
// the order of their first use; comments dropped.
function positional(sql) {
  const names = [];
  const text = sql
    .split("\n")
    .filter((line) => !line.startsWith("--"))
    .join("\n")
    .replace(/(?<![:\w]):(\w+)/g, (_, name) => {
      if (!names.includes(name)) names.push(name);
      return `$${names.indexOf(name) + 1}`;
    });
  return { text, names };
}

function render() {
  const index = JSON.parse(readFileSync(join(SCHEMAS, "index.json"), "utf8"));
  const lua = readFileSync(LUA, "utf8");
  const lines = [
    `// Generated by \`${COMMAND}\` from tests/contracts/schemas/ (\`fleet contracts export\`),`,
    `// ${relative(ROOT, LUA)} and ${relative(ROOT, STAGE_RUN)}. Do not edit: a change to them regenerates it.`,
    `import { z } from "zod";`,
    `import { email, isoDate, uuid } from "../formats";`,
    ``,
    `/** The claim-and-enqueue script of every producer (docs/wire-protocol.md §3). */`,
    `export const ENQUEUE_ONCE_LUA = ${lit(lua)};`,
    ``,
    `/** The STAGED run of a staged job, the Python producers' statement (shared/outbox/stage_run.sql). */`,
    `export const STAGE_RUN = ${lit(positional(readFileSync(STAGE_RUN, "utf8")))} as const;`,
    ``,
  ];
  const jobs = [];
  for (const [name, entry] of Object.entries(index).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const versions = [];
    for (const v of entry.versions) {
      const schema = JSON.parse(readFileSync(join(SCHEMAS, entry.files[String(v)]), "utf8"));
      const defs = new Set(Object.keys(schema.$defs ?? {}));
      const ident = `${name.replace(/[^A-Za-z0-9]/g, "_")}_v${v}`;
      lines.push(`// ${name} v${v} (${entry.files[String(v)]})`);
      lines.push(`export const ${ident} = (() => {`);
      for (const [def, node] of Object.entries(schema.$defs ?? {})) {
        lines.push(`  const def_${def}: z.ZodType = ${zod(node, defs)};`);
      }
      lines.push(`  return ${zod({ ...schema, $defs: undefined }, defs)};`);
      lines.push(`})();`);
      versions.push(`${v}: ${ident}`);
    }
    jobs.push(
      `  ${lit(name)}: { name: ${lit(name)}, queue: ${lit(entry.queue)}, entityType: ${lit(entry.entity_type)}, ` +
        `latest: ${entry.latest}, idRule: ${lit(entry.job_id)} as IdRule, versions: { ${versions.join(", ")} } },`,
    );
  }
  lines.push(
    ``,
    `/** How a job's id is made (docs/wire-protocol.md §1). */`,
    `export type IdRule =`,
    `  | { form: "hash"; entity: string; hashed: string[] | null }`,
    `  | { form: "chain"; action_type: string; address: string }`,
    `  | { form: "custom" };`,
    ``,
    `/** Every job of the fleet, by name: its queue, entity type, latest version, id rule and schemas. */`,
    `export const CONTRACTS = {`,
    ...jobs,
    `} as const;`,
    ``,
  );
  return lines.join("\n");
}

const text = render();
if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync(OUT, "utf8");
  } catch {}
  if (current !== text) {
    console.error(
      `${relative(ROOT, OUT)} is out of date with the fleet's contracts (${relative(ROOT, SCHEMAS)}): ` +
        `run \`${COMMAND}\``,
    );
    process.exit(1);
  }
  console.log(`${relative(ROOT, OUT)} follows the fleet's contracts`);
} else {
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, text);
  console.log(`wrote ${relative(ROOT, OUT)}`);
}
