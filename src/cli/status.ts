// `agent status`: one screen on the running agent — identity, the workload certificate's expiry,
// the istiod connection, the xDS stream's types (version, nonce, ACK/NACK) and readiness — read
// from the status port's /debug/config_dump (see debug.ts). Relative times are counted from the
// dump's own `generated` time, so the screen says what the agent saw when it answered.
// `-o json|yaml` prints the same summary as data.

import { parseFlags, type FlagSpec } from "../lib/flags.ts";
import type { ConfigDump } from "../debug/configdump.ts";
import { CliError, type CliIO } from "./io.ts";
import { localRequest } from "../lib/localhttp.ts";
import type { RequestSender } from "./request.ts";
import { askAgent, formatAs, PORT_FLAG } from "./debug.ts";

export const STATUS_FLAGS: FlagSpec[] = [
  PORT_FLAG,
  { name: "output", short: "o", type: "string", default: "text", usage: "Output format: text, json or yaml" },
];

/** The summary `agent status` shows, from a config dump. */
export function statusSummary(d: ConfigDump) {
  const id = d.identity;
  const cert = id.certificates.find((c) => c.resource === "default");
  const x = d.xds;
  return {
    node: d.node.id,
    pod: `${d.node.podNamespace}/${d.node.podName}`,
    identity: {
      spiffeId: id.spiffeId,
      state: id.workloadState,
      ...(cert ? { serial: cert.serial, issuer: cert.issuer, notAfter: cert.notAfter, expiresInSeconds: cert.expiresInSeconds } : {}),
      ...(id.lastCaError ? { lastCaError: id.lastCaError } : {}),
    },
    ca: d.ca,
    istiod: x.enabled && "upstream" in x ? x.upstream : undefined,
    stream:
      x.enabled && "stream" in x && x.stream
        ? {
            delta: x.stream.delta,
            active: x.stream.active,
            types: x.stream.types.map((t) => ({
              typeUrl: t.typeUrl,
              version: t.lastVersion ?? "",
              nonce: t.lastNonce ?? "",
              answer: t.lastAck ?? "",
              ...(t.lastNack ? { lastNack: t.lastNack.reason } : {}),
              responses: t.responses,
            })),
          }
        : undefined,
    readiness: {
      ready: d.readiness.ready,
      blockers: d.readiness.blockers.map((b) => `${b.name}: ${b.lastError ?? `pending for ${b.pendingSeconds}s`}`),
      warnings: d.readiness.warnings.map((w) => `${w.name}: ${w.lastError ?? `pending for ${w.pendingSeconds}s`}`),
    },
    envoy: d.envoy.enabled && "state" in d.envoy ? { state: d.envoy.state, pids: d.envoy.pids, restarts: d.envoy.restarts } : undefined,
  };
}

/**
 * 90 -> `1m30s`; whole units, the two largest, rounded down: a certificate with 23h59m59.6s left
 * reads `23h59m`, never `1d` (seen when `agent status` ran within a second of the issuance).
 */
export function humanSeconds(s: number): string {
  const a = Math.floor(Math.abs(s));
  const parts: [number, string][] = [
    [Math.floor(a / 86400), "d"],
    [Math.floor((a % 86400) / 3600), "h"],
    [Math.floor((a % 3600) / 60), "m"],
    [a % 60, "s"],
  ];
  const first = parts.findIndex(([n]) => n > 0);
  if (first < 0) return "0s";
  return parts
    .slice(first, first + 2)
    .filter(([n]) => n > 0)
    .map(([n, u]) => `${n}${u}`)
    .join("");
}

function since(iso: string | undefined, now: number): string {
  return iso ? `${humanSeconds((now - Date.parse(iso)) / 1000)} ago` : "";
}

const shortType = (t: string) => t.replace("type.googleapis.com/", "");

/** The one screen. */
export function renderStatus(d: ConfigDump): string {
  const s = statusSummary(d);
  const now = Date.parse(d.generated ?? "") || 0;
  const lines: string[] = [];
  const row = (k: string, v: string) => lines.push(`${(k + ":").padEnd(13)}${v}`);
  row("Pod", `${s.pod} (${s.node})`);
  row("Identity", s.identity.spiffeId || "(none)");
  const i = s.identity;
  row(
    "Certificate",
    i.notAfter
      ? `${i.state}, serial ${i.serial}, expires ${i.notAfter} (${i.expiresInSeconds! > 0 ? `in ${humanSeconds(i.expiresInSeconds!)}` : `${humanSeconds(i.expiresInSeconds!)} ago`})`
      : i.state,
  );
  const ca = s.ca as { provider: string; address?: string };
  row(
    "CA",
    `${ca.provider}${ca.address ? ` ${ca.address}` : ""}${i.lastCaError ? `; last error ${since(i.lastCaError.at, now)}: ${i.lastCaError.message}` : ""}`,
  );
  if (s.istiod) {
    const u = s.istiod;
    const err = "lastError" in u && u.lastError ? `; last error ${since(u.lastError.at, now)}: ${u.lastError.message}` : "";
    row("istiod", `${u.state} ${u.address}${"since" in u && u.since ? ` since ${since(u.since, now)}` : ""}${err}`);
  } else row("istiod", "no xDS relay");
  if (s.stream) {
    row(
      "Stream",
      `${s.stream.delta ? "Delta" : "SotW"}, ${s.stream.active ? "active" : "ended"}, ${s.stream.types.length} ${s.stream.types.length === 1 ? "type" : "types"}`,
    );
    const table = [
      ["TYPE", "VERSION", "NONCE", "ANSWER", "RESPONSES"],
      ...s.stream.types.map((t) => [shortType(t.typeUrl), t.version, t.nonce, t.answer, String(t.responses)]),
    ];
    const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    for (const r of table) lines.push(`  ${r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join("  ")}`);
    for (const t of s.stream.types) if (t.lastNack) lines.push(`  NACK ${shortType(t.typeUrl)}: ${t.lastNack}`);
  } else row("Stream", "none yet");
  const r = s.readiness;
  row("Readiness", r.ready ? "ready" : `not ready: ${r.blockers.length} pending`);
  for (const b of r.blockers) lines.push(`  blocker  ${b}`);
  for (const w of r.warnings) lines.push(`  warning  ${w}`);
  row("Envoy", s.envoy ? `${s.envoy.state}, pid ${s.envoy.pids.join(",") || "none"}, restarts ${s.envoy.restarts}` : "not run by this agent");
  return lines.join("\n") + "\n";
}

export async function runStatus(argv: string[], io: CliIO, send: RequestSender = localRequest): Promise<number> {
  const { values, positionals } = parseFlags(argv, STATUS_FLAGS);
  if (positionals.length > 0) throw new CliError(`status takes no arguments, got ${JSON.stringify(positionals.join(" "))}`);
  const output = String(values.output);
  if (!["text", "json", "yaml"].includes(output)) throw new CliError(`-o ${output}: unknown output format (want text, json or yaml)`);
  const dump = (await askAgent(send, values.port as number, "GET", "/debug/config_dump")) as ConfigDump;
  if (typeof dump !== "object" || dump === null || (dump as { schema?: unknown }).schema === undefined) {
    throw new CliError(`GET http://localhost:${String(values.port)}/debug/config_dump: not a config dump (no "schema" field)`);
  }
  io.out(output === "text" ? renderStatus(dump) : formatAs(statusSummary(dump), output));
  return 0;
}
