import { errorMessage } from "../lib/errors.ts";
// ISTIO_PROMETHEUS_ANNOTATIONS: where the application's metrics are, from the pod's
// prometheus.io/{scrape,path,port} annotations, written by the injector as JSON:
//   {"scrape":"true","path":"/metrics","port":"8080"}
//   {"scrape":"true","targets":[{"port":"8080","path":"/metrics"},{"port":"9090"}]}
// Legacy defaults: path /metrics, port 80. A target on the status port would scrape itself forever,
// and Istio's own ports never carry application metrics: both are refused with the reason, and
// the other targets keep being scraped. Pure: no I/O.

export interface ScrapeTarget {
  port: number;
  path: string;
}

export interface ScrapeConfig {
  targets: ScrapeTarget[];
  /** One line per refused target or unreadable setting. */
  problems: string[];
}

const ENV = "ISTIO_PROMETHEUS_ANNOTATIONS";

/** Ports Istio reserves in a pod, and what each is. */
export const RESERVED_PORTS: ReadonlyMap<number, string> = new Map([
  [15000, "the Envoy admin API"],
  [15001, "Envoy's outbound capture listener"],
  [15004, "the agent's legacy debug port"],
  [15006, "Envoy's inbound capture listener"],
  [15008, "the HBONE tunnel"],
  [15020, "the agent's status server"],
  [15021, "Envoy's health listener"],
  [15053, "the DNS proxy"],
  [15090, "Envoy's Prometheus listener"],
]);

/** Why a port cannot be scraped, or undefined when it can. */
export function scrapePortProblem(port: number, statusPort: number): string | undefined {
  if (!Number.isInteger(port) || port < 1 || port > 65535) return `port ${port} is not in 1-65535`;
  if (port === statusPort) {
    return `application port is the same as agent port (${statusPort}), which may lead to a recursive loop. Ensure pod does not have prometheus.io/port=${statusPort} annotation, or that injection is not happening multiple times`;
  }
  const what = RESERVED_PORTS.get(port);
  if (what) return `port ${port} is reserved by Istio for ${what}; serve application metrics on another port`;
  return undefined;
}

function portOf(v: unknown): number {
  if (typeof v === "number") return v;
  if (typeof v === "string" && /^\s*\d+\s*$/.test(v)) return Number(v);
  return NaN;
}

function pathOf(v: unknown, dflt: string): string {
  if (typeof v !== "string" || v === "") return dflt;
  return v.startsWith("/") ? v : `/${v}`;
}

/** undefined when application metrics are not merged (unset, or scrape "false"). */
export function parseScrapeConfig(raw: string | undefined, statusPort: number): ScrapeConfig | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(raw);
  } catch (e) {
    return { targets: [], problems: [`${ENV}: failed to unmarshal ${JSON.stringify(raw.slice(0, 200))}: ${errorMessage(e)}`] };
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) {
    return { targets: [], problems: [`${ENV}: want a JSON object, got ${JSON.stringify(raw.slice(0, 200))}`] };
  }
  const d = doc as { scrape?: unknown; path?: unknown; port?: unknown; targets?: unknown };
  if (String(d.scrape) === "false") return undefined;
  const out: ScrapeConfig = { targets: [], problems: [] };
  const topPath = pathOf(d.path, "/metrics");
  const wanted: { port: unknown; path: string; where: string }[] = [];
  if (Array.isArray(d.targets) && d.targets.length > 0) {
    d.targets.forEach((t, i) => {
      const o = (t && typeof t === "object" ? t : {}) as { port?: unknown; path?: unknown };
      wanted.push({ port: o.port, path: pathOf(o.path, topPath), where: `targets[${i}]` });
    });
  } else {
    wanted.push({ port: d.port === undefined || d.port === "" ? "80" : d.port, path: topPath, where: "port" });
  }
  for (const w of wanted) {
    const port = portOf(w.port);
    const problem = Number.isNaN(port) ? `port ${JSON.stringify(w.port)} is not a number` : scrapePortProblem(port, statusPort);
    if (problem) out.problems.push(`${ENV} ${w.where}: invalid prometheus scrape configuration: ${problem}`);
    else out.targets.push({ port, path: w.path });
  }
  return out;
}
