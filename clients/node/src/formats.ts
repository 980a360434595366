// The string formats of the fleet's contracts, normalised as the Python contracts (pydantic)
// normalise them before a job id is derived: the hashed form is the payload as the worker sees it.
import { z } from "zod";

const UUID =
  /^(?:urn:uuid:)?\{?([0-9a-fA-F]{8})-?([0-9a-fA-F]{4})-?([0-9a-fA-F]{4})-?([0-9a-fA-F]{4})-?([0-9a-fA-F]{12})\}?$/;

/** A UUID in any form Python's `uuid.UUID` reads, as its canonical text (lower case, hyphens). */
export function uuid() {
  return z.string().transform((value, ctx) => {
    const m = UUID.exec(value);
    if (!m) {
      ctx.addIssue({ code: "custom", message: "must be a UUID" });
      return z.NEVER;
    }
    return m.slice(1).join("-").toLowerCase();
  });
}

// A dot-atom local part (no leading, trailing or doubled dot) and a dotted domain of labels that
// neither start nor end with "-", as email-validator (pydantic's EmailStr) reads them.
const ATOM = "[^\\s@.\"(),:;<>[\\\\\\]]+";
const LOCAL = new RegExp(`^${ATOM}(?:\\.${ATOM})*$`, "u");
const LABEL = "[^\\s@.\\-_](?:[^\\s@._]*[^\\s@.\\-_])?";
const DOMAIN = new RegExp(`^(?:${LABEL}\\.)+[^\\s@.\\-_0-9][^\\s@._]*$`, "u");

/** An e-mail address as pydantic's `EmailStr` keeps it: trimmed, the domain in lower case. */
export function email() {
  return z.string().transform((value, ctx) => {
    const text = value.trim().normalize("NFC");
    const at = text.lastIndexOf("@");
    const local = text.slice(0, at);
    const domain = text.slice(at + 1).toLowerCase();
    if (at <= 0 || local.length > 64 || !LOCAL.test(local) || !DOMAIN.test(domain)) {
      ctx.addIssue({ code: "custom", message: "must be one e-mail address" });
      return z.NEVER;
    }
    return `${local}@${domain}`;
  });
}

/** A calendar date, `YYYY-MM-DD` (ISO 8601). */
export function isoDate() {
  return z.string().refine((value) => {
    const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
    if (!m) return false;
    const d = new Date(Date.UTC(+m[1], +m[2] - 1, +m[3]));
    return d.getUTCFullYear() === +m[1] && d.getUTCMonth() === +m[2] - 1 && d.getUTCDate() === +m[3];
  }, "must be a date, YYYY-MM-DD");
}
