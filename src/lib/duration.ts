// Go durations: `time.ParseDuration` and `Duration.String()`, and protobuf JSON durations.
// Values are carried as milliseconds (number, may be fractional) everywhere in the agent.

export class DurationError extends Error {
  override name = "DurationError";
}

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Parse a Go duration string (`45s`, `1m0s`, `1h2m3.5s`, `-5s`, `0`) into milliseconds. */
/** Go's longest time.Duration (math.MaxInt64 nanoseconds), in milliseconds. */
export const MAX_GO_DURATION_MS = 9_223_372_036_854.775807;

export function parseGoDuration(input: string): number {
  const s = input.trim();
  if (s === "") throw new DurationError(`invalid duration ""`);
  let i = 0;
  let sign = 1;
  if (s[0] === "-" || s[0] === "+") {
    if (s[0] === "-") sign = -1;
    i = 1;
  }
  if (s.slice(i) === "0") return 0;
  if (i >= s.length) throw new DurationError(`invalid duration "${input}"`);
  let total = 0;
  while (i < s.length) {
    const num = /^(\d*)(?:\.(\d*))?/.exec(s.slice(i));
    if (!num || (num[1] === "" && (num[2] === undefined || num[2] === ""))) {
      throw new DurationError(`invalid duration "${input}"`);
    }
    i += num[0].length;
    const unit = /^[a-zµμ]+/.exec(s.slice(i));
    if (!unit) throw new DurationError(`missing unit in duration "${input}"`);
    const factor = UNIT_MS[unit[0]];
    if (factor === undefined) throw new DurationError(`unknown unit "${unit[0]}" in duration "${input}"`);
    i += unit[0].length;
    total += Number(`${num[1] || "0"}.${num[2] || "0"}`) * factor;
  }
  // As Go: a duration is an int64 of nanoseconds (at most 2562047h47m16.854775807s).
  if (total > MAX_GO_DURATION_MS) throw new DurationError(`invalid duration "${input}"`);
  return sign * total;
}

/** Format milliseconds the way Go's `time.Duration.String()` does (`1h2m3.5s`, `500ms`, `0s`). */
export function formatGoDuration(ms: number): string {
  // Work in integer nanoseconds, as Go does.
  let ns = BigInt(Math.round(ms * 1e6));
  if (ns === 0n) return "0s";
  const neg = ns < 0n;
  if (neg) ns = -ns;
  let out: string;
  if (ns < 1_000_000_000n) {
    // Sub-second: use ns, µs or ms with a fraction.
    if (ns < 1000n) out = `${ns}ns`;
    else if (ns < 1_000_000n) out = `${fraction(ns, 1000n)}µs`;
    else out = `${fraction(ns, 1_000_000n)}ms`;
  } else {
    const h = ns / 3_600_000_000_000n;
    ns -= h * 3_600_000_000_000n;
    const m = ns / 60_000_000_000n;
    ns -= m * 60_000_000_000n;
    out = `${fraction(ns, 1_000_000_000n)}s`;
    if (h > 0n) out = `${h}h${m}m${out}`;
    else if (m > 0n) out = `${m}m${out}`;
  }
  return neg ? `-${out}` : out;
}

function fraction(v: bigint, unit: bigint): string {
  const whole = v / unit;
  const rest = v % unit;
  if (rest === 0n) return `${whole}`;
  const digits = unit.toString().length - 1;
  const frac = rest.toString().padStart(digits, "0").replace(/0+$/, "");
  return `${whole}.${frac}`;
}

/** Parse a protobuf JSON duration (`"45s"`, `"0.500s"`, `"-1.5s"`) into milliseconds. */
export function parseProtoDuration(input: string): number {
  const m = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(input.trim());
  if (!m) throw new DurationError(`invalid protobuf duration "${input}" (want e.g. "5s" or "0.500s")`);
  const v = Number(m[2]) * 1000 + (m[3] ? Number(`0.${m[3]}`) * 1000 : 0);
  return m[1] ? -v : v;
}

/** Format milliseconds as protobuf JSON does: `5s`, `0.500s`, `1.000000001s` (0, 3, 6 or 9 digits). */
export function formatProtoDuration(ms: number): string {
  let ns = BigInt(Math.round(ms * 1e6));
  const neg = ns < 0n;
  if (neg) ns = -ns;
  const secs = ns / 1_000_000_000n;
  const nanos = ns % 1_000_000_000n;
  let frac = "";
  if (nanos !== 0n) {
    if (nanos % 1_000_000n === 0n) frac = "." + (nanos / 1_000_000n).toString().padStart(3, "0");
    else if (nanos % 1000n === 0n) frac = "." + (nanos / 1000n).toString().padStart(6, "0");
    else frac = "." + nanos.toString().padStart(9, "0");
  }
  return `${neg ? "-" : ""}${secs}${frac}s`;
}

/** Accept either a Go duration or a protobuf JSON duration (what users write in YAML). */
export function parseAnyDuration(input: string): number {
  try {
    return parseProtoDuration(input);
  } catch {
    return parseGoDuration(input);
  }
}
