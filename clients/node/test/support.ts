// What the tests share: the repository's paths and the Python producers' answers.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

export const ROOT = join(__dirname, "..", "..", "..", "..");

/** The project's interpreter (JOBFLEET_PYTHON, else the repository's .venv). */
export function python(): string {
  const configured = process.env.JOBFLEET_PYTHON;
  if (configured) return configured;
  const venv = join(ROOT, ".venv", "bin", "python");
  if (!existsSync(venv)) throw new Error("set JOBFLEET_PYTHON (no .venv at the repository root)");
  return venv;
}

const PY_IDS = `
import json, sys
from shared.jobs import catalog
out = []
for case in json.load(sys.stdin):
    spec = catalog.get(case["job"])
    try:
        out.append(spec.job_id(spec.build(case["payload"])))
    except Exception as exc:
        out.append({"error": type(exc).__name__})
print(json.dumps(out))
`;

/**
 * The job id the Python producers derive for each payload, parsed from the JSON text this
 * package would send (so exactly what a worker reads), or {error} when Python refuses it.
 */
export function pythonJobIds(cases: { job: string; payload: unknown }[]): (string | { error: string })[] {
  const input = "[" + cases.map((c) => `{"job":${JSON.stringify(c.job)},"payload":${JSON.stringify(c.payload)}}`).join(",") + "]";
  const out = execFileSync(python(), ["-c", PY_IDS], { cwd: ROOT, input, encoding: "utf8", maxBuffer: 64 << 20 });
  return JSON.parse(out);
}
