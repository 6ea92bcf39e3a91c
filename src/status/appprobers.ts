// ISTIO_KUBE_APP_PROBERS: the injector's rewritten Kubernetes probes, a JSON map from status-port
// path to prober, e.g. {"/app-health/web/livez":{"httpGet":{"path":"/healthz","port":8080},"timeoutSeconds":1}}.
// Parsing is pure and validates as Istio does (path pattern, exactly one handler, integer ports).
// Istio refuses to start on a bad entry; we keep serving: a bad entry's path answers 500 with the
// reason, and every other probe keeps working.

import { StatusError } from "./errors.ts";
import { errorMessage } from "../lib/errors.ts";

const APP_PROBER_PATTERN_TEXT = "^/(app-health|app-lifecycle)/[^/]+/(livez|readyz|startupz|prestopz|poststartz)$";
export const APP_PROBER_PATTERN = new RegExp(APP_PROBER_PATTERN_TEXT);
const ENV = "ISTIO_KUBE_APP_PROBERS";

export interface HttpGetProbe {
  kind: "httpGet";
  port: number;
  path: string;
  scheme: "http" | "https";
  /** Headers from the probe spec; sent unless the incoming request carries the same header. */
  headers: [string, string][];
}
export interface TcpSocketProbe {
  kind: "tcpSocket";
  port: number;
}
export interface GrpcProbe {
  kind: "grpc";
  port: number;
  service: string;
}
export type ProbeAction = HttpGetProbe | TcpSocketProbe | GrpcProbe;
export type AppProbe = ProbeAction & { timeoutMs: number };

export interface AppProbers {
  probes: Map<string, AppProbe>;
  /** Entries that failed validation: path -> reason. */
  invalid: Map<string, string>;
  /** Set when the whole variable is unusable (not JSON, not an object). */
  configError?: string;
  /** Entries Istio refuses at start (AppProberRejected), one line each: the agent must not start. */
  rejected: string[];
}

/** Kubernetes' default probe timeout, used when timeoutSeconds is 0 or absent. */
export const DEFAULT_PROBE_TIMEOUT_MS = 1000;

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => !!v && typeof v === "object" && !Array.isArray(v);

/**
 * What Istio's status server refuses at start (NewServer fails, pilot-agent exits): a value that
 * does not decode into its Prober type, a path outside the pattern, not exactly one handler, a
 * port that is not an int. Our stricter checks (ranges, schemes, header names) only mark the entry.
 */
export class AppProberRejected extends StatusError {
  override name = "AppProberRejected";
}

function intPort(v: unknown, where: string): number {
  if (v === undefined || v === null) v = 0; // IntOrString's zero value: Istio accepts it, the probe fails
  if (typeof v !== "number" || !Number.isInteger(v)) {
    throw new AppProberRejected(`invalid prober config for ${where}, the port must be int type (got ${JSON.stringify(v)})`);
  }
  if (v < 1 || v > 65535) throw new StatusError(`invalid prober config for ${where}, port ${v} is out of range 1-65535`);
  return v;
}

function headersOf(v: unknown, where: string): [string, string][] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new AppProberRejected(`invalid prober config for ${where}, httpHeaders must be a list`);
  return v.map((h) => {
    if (!isObj(h) || typeof h.name !== "string" || !h.name) throw new StatusError(`invalid prober config for ${where}, each httpHeaders entry needs a name`);
    return [h.name, typeof h.value === "string" ? h.value : String(h.value ?? "")];
  });
}

/** Validate one entry; throws StatusError naming the path. */
export function parseAppProbe(path: string, raw: unknown): AppProbe {
  if (!APP_PROBER_PATTERN.test(path)) {
    throw new AppProberRejected(`invalid path "${path}", must be in form of regex pattern ${APP_PROBER_PATTERN_TEXT}`);
  }
  if (!isObj(raw)) throw new AppProberRejected(`invalid prober config for ${path}, want an object with one of httpGet, tcpSocket or grpc`);
  const handlers = (["httpGet", "tcpSocket", "grpc"] as const).filter((k) => raw[k] !== undefined && raw[k] !== null);
  if (handlers.length !== 1) {
    const found = handlers.length === 0 ? "none" : handlers.join(" and ");
    throw new AppProberRejected(`invalid prober type for ${path}, must be exactly one of type httpGet, tcpSocket or gRPC (found ${found})`);
  }
  const t = raw.timeoutSeconds;
  if (t !== undefined && t !== null && (typeof t !== "number" || !Number.isInteger(t))) {
    throw new AppProberRejected(`invalid prober config for ${path}, timeoutSeconds must be an integer (got ${JSON.stringify(t)})`);
  }
  if (typeof t === "number" && t < 0) {
    throw new StatusError(`invalid prober config for ${path}, timeoutSeconds must be a non-negative integer (got ${JSON.stringify(t)})`);
  }
  const timeoutMs = t ? t * 1000 : DEFAULT_PROBE_TIMEOUT_MS;
  const h = raw[handlers[0]!];
  if (!isObj(h)) throw new AppProberRejected(`invalid prober config for ${path}, ${handlers[0]} must be an object`);
  switch (handlers[0]) {
    case "httpGet": {
      const scheme = typeof h.scheme === "string" ? h.scheme.toLowerCase() : "http";
      if (scheme !== "http" && scheme !== "https")
        throw new StatusError(`invalid prober config for ${path}, scheme must be HTTP or HTTPS (got ${JSON.stringify(h.scheme)})`);
      let p = typeof h.path === "string" ? h.path : "";
      if (!p.startsWith("/")) p = "/" + p;
      return { kind: "httpGet", port: intPort(h.port, path), path: p, scheme, headers: headersOf(h.httpHeaders, path), timeoutMs };
    }
    case "tcpSocket":
      return { kind: "tcpSocket", port: intPort(h.port, path), timeoutMs };
    default: {
      if (h.service !== undefined && h.service !== null && typeof h.service !== "string") {
        throw new AppProberRejected(`invalid prober config for ${path}, grpc service must be a string`);
      }
      return { kind: "grpc", port: intPort(h.port, path), service: (h.service as string | undefined) ?? "", timeoutMs };
    }
  }
}

export function parseAppProbers(raw: string): AppProbers {
  const out: AppProbers = { probes: new Map(), invalid: new Map(), rejected: [] };
  if (!raw.trim()) return out;
  let doc: unknown;
  try {
    doc = JSON.parse(raw);
  } catch (e) {
    out.configError = `${ENV}: failed to decode app prober config (${errorMessage(e)}); json string = ${raw.slice(0, 300)}`;
    return out;
  }
  if (!isObj(doc)) {
    out.configError = `${ENV}: want a JSON object mapping probe paths to probers, got ${Array.isArray(doc) ? "an array" : typeof doc}`;
    return out;
  }
  for (const [path, prober] of Object.entries(doc)) {
    try {
      out.probes.set(path, parseAppProbe(path, prober));
    } catch (e) {
      out.invalid.set(path, `${ENV}: ${errorMessage(e)}`);
      if (e instanceof AppProberRejected) out.rejected.push(`${ENV}: ${e.message}`);
    }
  }
  return out;
}
