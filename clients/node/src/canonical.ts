// Canonical JSON (docs/wire-protocol.md §1): Python's json.dumps(sort_keys=True,
// separators=(",", ":"), ensure_ascii=False, allow_nan=False) of the payload as the worker parses
// it from the message this package writes.
//
// Numbers: the message carries JSON.stringify's text. Python reads a number written without "."
// or an exponent as an int (any size) and hashes that same text; any other as a float, which it
// hashes as repr(float): the shortest round-trip digits (JavaScript finds the same), with a "."
// or an exponent, the exponent form outside 1e-4 <= |x| < 1e16, written e+16 / e-07.

export function canonical(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") return number(value);
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => byCodePoint(a, b));
    return "{" + entries.map(([k, v]) => JSON.stringify(k) + ":" + canonical(v)).join(",") + "}";
  }
  throw new TypeError(`${typeof value} has no JSON form`);
}

/** What Python's json.dumps writes for the number JSON.stringify wrote as it reads it back. */
export function number(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError("NaN and infinities are refused");
  const text = JSON.stringify(x);
  if (!/[.eE]/.test(text)) return text; // Python reads an int: the same digits
  return pythonFloatRepr(x);
}

/** Python's repr(float). */
export function pythonFloatRepr(x: number): string {
  if (Object.is(x, -0)) return "-0.0";
  if (x === 0) return "0.0";
  const [mantissa, exp] = x.toExponential().split("e"); // shortest round-trip digits
  const exponent = Number(exp);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = `${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
    return `${sign}${m}e${e}`;
  }
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, "0");
  const fraction = digits.slice(exponent + 1);
  return `${sign}${whole}.${fraction || "0"}`;
}

/** Object keys by Unicode code point (Python's str order), not UTF-16 code units. */
export function byCodePoint(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0)!);
  const y = Array.from(b, (c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}
