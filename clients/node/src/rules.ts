// The rules of the Python contracts that their JSON Schemas cannot state (pydantic model
// validators across fields), checked after the schema. The property test of test/jobid.test.ts
// sends random payloads to both sides and fails when they accept different ones.
import type { PayloadIssue } from "./errors";

type Rule = (payload: Record<string, unknown>) => PayloadIssue[];

interface Params {
  format?: string;
  bom?: boolean;
  date_range?: { start: string; end: string } | null;
}

function exportParams(payload: Record<string, unknown>): PayloadIssue[] {
  const params = (payload.params ?? {}) as Params;
  const issues: PayloadIssue[] = [];
  if (params.date_range && params.date_range.end < params.date_range.start) {
    issues.push({ path: "params.date_range", message: "end must not be before start" });
  }
  if (params.bom && !["CSV", "ZIP"].includes(params.format ?? "CSV")) {
    issues.push({ path: "params", message: "bom applies to CSV and ZIP only" });
  }
  return issues;
}

/** workers/export/contracts.py: `DateRange._ordered`, `ExportParams._bom_for_csv`. */
export const RULES: Record<string, Rule> = {
  "export:build": exportParams,
};
