#!/usr/bin/env node
// Compiles the reference contracts offline with the pinned solcjs (npm `solc`, the compiler ships
// inside the package as wasm/js: nothing is downloaded) and writes one artifact per deployable
// contract to chain/artifacts/<Name>.json, so the fleet loads ABIs without node.
//
//   node contracts/build.mjs            write the artifacts
//   node contracts/build.mjs --check    exit 1 when the committed artifacts differ from a rebuild
//   node contracts/build.mjs --out DIR  write them to DIR instead
//
// Reproducible: sources are read in sorted order under stable relative names, settings are fixed
// below, and the JSON is written with sorted keys; the same repo gives byte-identical artifacts.
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const solc = require("solc");

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const DEFAULT_OUT = join(ROOT, "chain", "artifacts");
const CONTRACTS = ["BlockLucky", "BlockLuckyPOAP", "VRFCoordinatorLocal"];
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: "cancun",
  metadata: { bytecodeHash: "none", appendCBOR: false },
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
};

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeys(value[k])]));
  }
  return value;
}

function compile() {
  const sources = {};
  for (const file of readdirSync(HERE).filter((f) => f.endsWith(".sol")).sort()) {
    sources[file] = { content: readFileSync(join(HERE, file), "utf8") };
  }
  const input = { language: "Solidity", sources, settings: SETTINGS };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors || []).filter((e) => e.severity === "error");
  for (const e of output.errors || []) process.stderr.write(e.formattedMessage + "\n");
  if (errors.length) process.exit(2);
  const artifacts = {};
  for (const [file, contracts] of Object.entries(output.contracts)) {
    for (const [name, c] of Object.entries(contracts)) {
      if (!CONTRACTS.includes(name)) continue;
      const source = sources[file].content;
      artifacts[name] = sortKeys({
        contractName: name,
        sourceName: `contracts/${file}`,
        sourceSha256: createHash("sha256").update(source).digest("hex"),
        compiler: { name: "solc", version: solc.version(), settings: SETTINGS },
        abi: c.abi,
        bytecode: "0x" + c.evm.bytecode.object,
        deployedBytecode: "0x" + c.evm.deployedBytecode.object,
      });
    }
  }
  for (const name of CONTRACTS) {
    if (!artifacts[name]) throw new Error(`contract ${name} not found in the sources`);
  }
  return artifacts;
}

function main() {
  const args = process.argv.slice(2);
  const check = args.includes("--check");
  const outIdx = args.indexOf("--out");
  const out = outIdx >= 0 ? args[outIdx + 1] : DEFAULT_OUT;
  const artifacts = compile();
  let stale = [];
  if (!check) mkdirSync(out, { recursive: true });
  for (const [name, artifact] of Object.entries(artifacts)) {
    const path = join(out, `${name}.json`);
    const text = JSON.stringify(artifact, null, 2) + "\n";
    if (check) {
      if (!existsSync(path) || readFileSync(path, "utf8") !== text) stale.push(path);
    } else {
      writeFileSync(path, text);
    }
  }
  if (check && stale.length) {
    process.stderr.write(`stale artifacts (run node contracts/build.mjs): ${stale.join(", ")}\n`);
    process.exit(1);
  }
  process.stdout.write(`${check ? "checked" : "wrote"} ${Object.keys(artifacts).length} artifacts (solc ${solc.version()})\n`);
}

main();
