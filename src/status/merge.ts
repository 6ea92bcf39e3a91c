// The merged scrape behind /stats/prometheus and /metrics (Istio status/server.go handleStats):
// (1) the agent's registry, (2) Envoy's /stats/prometheus, (3) the application's metrics, in that
// order (the application goes last: an OpenMetrics `# EOF` ends the page). Envoy's page and a
// single application target are STREAMED through, never held whole in memory (Istio #32386);
// several targets are fetched concurrently, each capped at 10 MiB, and concatenated. Failures
// never fail the scrape: the part is left out, counted in
// istio_agent_scrape_failures_total{type=envoy|application|agent} and logged.

import type { Registry } from "prom-client";
import type { Logger } from "../lib/log.ts";
import { counter } from "../lib/metrics.ts";
import { errorMessage } from "../lib/errors.ts";
import { joinHostPort } from "./loopback.ts";
import { FMT_TEXT, type MetricsFormat, combineFormats, isOpenMetrics, negotiateFormat, rewriteAccept, stripEof } from "./negotiate.ts";
import type { ScrapeConfig } from "./scrapeconfig.ts";

export const MAX_TARGET_BYTES = 10 * 1024 * 1024;
const FORWARDED = ["user-agent", "x-prometheus-scrape-timeout-seconds"];

export interface MetricsMergerOptions {
  registry: Registry;
  log: Logger;
  /** Envoy's Prometheus listener; undefined when Envoy is off or PILOT_AGENT_MERGE_ENVOY_STATS=false. */
  envoy?: { host: string; port: number };
  /** Application targets; undefined when not a sidecar or not annotated. */
  app?: ScrapeConfig;
  /** Host the application is scraped on (Istio: localhost). */
  appHost?: string;
  fetch?: typeof fetch;
}

type Part = () => Promise<ReadableStream<Uint8Array> | Uint8Array | undefined>;

export class MetricsMerger {
  private readonly scrapes;
  private readonly failures;
  private readonly fetch: typeof fetch;

  constructor(private readonly opts: MetricsMergerOptions) {
    this.scrapes = counter(opts.registry, "istio_agent_scrapes_total", "The total number of scrapes.");
    this.failures = counter(opts.registry, "istio_agent_scrape_failures_total", "The total number of failed scrapes.", ["type"]);
    this.fetch = opts.fetch ?? fetch;
    for (const p of opts.app?.problems ?? []) opts.log.error(p);
  }

  async handle(req: Request): Promise<Response> {
    this.scrapes.inc();
    const timeoutMs = this.scrapeTimeoutMs(req);
    const envoy = this.opts.envoy ? this.scrapeEnvoy(req, timeoutMs) : undefined;
    const app = this.opts.app?.targets.length ? this.scrapeApp(req, timeoutMs) : undefined;
    let agentText: Uint8Array | undefined;
    try {
      agentText = ensureNewline(new TextEncoder().encode(await this.opts.registry.metrics()));
    } catch (e) {
      this.fail("agent", `failed scraping and writing agent metrics: ${errorMessage(e)}`);
    }
    const [envoyBody, appResult] = await Promise.all([envoy, app]);
    const parts: Part[] = [async () => agentText, async () => envoyBody];
    if (appResult) parts.push(async () => appResult.body);
    return new Response(
      concatStreams(parts, (stage, e) =>
        this.fail(stage === 1 ? "envoy" : "application", `failed writing ${stage === 1 ? "envoy" : "application"} metrics: ${errorMessage(e)}`),
      ),
      {
        status: 200,
        headers: { "content-type": appResult?.format ?? FMT_TEXT },
      },
    );
  }

  /** X-Prometheus-Scrape-Timeout-Seconds in ms, or undefined when absent or unreadable. */
  private scrapeTimeoutMs(req: Request): number | undefined {
    const raw = req.headers.get("x-prometheus-scrape-timeout-seconds");
    if (!raw) return undefined;
    const s = Number(raw);
    if (!Number.isFinite(s) || s <= 0) {
      this.opts.log.warn(`Failed to parse timeout header ${JSON.stringify(raw)}: not a positive number of seconds`);
      return undefined;
    }
    return Math.ceil(s * 1000);
  }

  private fail(type: "envoy" | "application" | "agent", msg: string): void {
    this.failures.inc({ type });
    this.opts.log.error(msg);
  }

  private headersFor(req: Request, part: "envoy" | "app"): Record<string, string> {
    const h: Record<string, string> = { accept: rewriteAccept(req.headers.get("accept"), part) };
    for (const k of FORWARDED) {
      const v = req.headers.get(k);
      if (v) h[k] = v;
    }
    return h;
  }

  /**
   * GET one upstream part. The scrape timeout bounds the wait for its answer (and, with
   * `bodyInDeadline`, the reading of its body); a streamed body then lives as long as the client
   * reads it, and ends when the client goes away.
   */
  private async get(
    url: string,
    req: Request,
    part: "envoy" | "app",
    timeoutMs: number | undefined,
    bodyInDeadline = false,
  ): Promise<{ res: Response; done: () => void }> {
    const ac = new AbortController();
    const onClientGone = () => ac.abort(req.signal.reason);
    if (req.signal.aborted) onClientGone();
    else req.signal.addEventListener("abort", onClientGone, { once: true });
    let timedOut = false;
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), ac.abort(new Error("scrape timeout exceeded"))), timeoutMs);
    const done = () => clearTimeout(timer);
    let res: Response;
    try {
      res = await this.fetch(url, { headers: this.headersFor(req, part), signal: ac.signal, redirect: "manual" });
    } catch (e) {
      done();
      throw new Error(`error scraping ${url}: ${timedOut ? `scrape timeout of ${timeoutMs}ms exceeded` : errorMessage(e)}`, { cause: e });
    }
    if (!bodyInDeadline) done();
    if (res.status !== 200) {
      done();
      await res.body?.cancel().catch(() => {});
      throw new Error(`error scraping ${url}, status code: ${res.status}`);
    }
    return { res, done };
  }

  private async scrapeEnvoy(req: Request, timeoutMs: number | undefined): Promise<ReadableStream<Uint8Array> | undefined> {
    const e = this.opts.envoy!;
    const query = new URL(req.url).search;
    const url = `http://${joinHostPort(e.host, e.port)}/stats/prometheus${query}`;
    try {
      return (await this.get(url, req, "envoy", timeoutMs)).res.body ?? undefined;
    } catch (err) {
      this.fail("envoy", `failed scraping envoy metrics: ${errorMessage(err)}`);
      return undefined;
    }
  }

  private appUrl(t: { port: number; path: string }): string {
    return `http://${joinHostPort(this.opts.appHost ?? "localhost", t.port)}${t.path}`;
  }

  private async scrapeApp(req: Request, timeoutMs: number | undefined): Promise<{ body?: ReadableStream<Uint8Array> | Uint8Array; format: MetricsFormat }> {
    const targets = this.opts.app!.targets;
    if (targets.length === 1) {
      try {
        const { res } = await this.get(this.appUrl(targets[0]!), req, "app", timeoutMs);
        return { body: res.body ?? undefined, format: negotiateFormat(res.headers.get("content-type")) };
      } catch (err) {
        this.fail("application", `failed scraping application metrics: ${errorMessage(err)}`);
        return { format: FMT_TEXT };
      }
    }
    const results = await Promise.all(
      targets.map(async (t) => {
        try {
          const { res, done } = await this.get(this.appUrl(t), req, "app", timeoutMs, true);
          const text = await readCapped(res, MAX_TARGET_BYTES, this.appUrl(t)).finally(done);
          return { text, format: negotiateFormat(res.headers.get("content-type")) };
        } catch (err) {
          this.fail("application", `failed scraping application metrics: ${errorMessage(err)}`);
          return undefined;
        }
      }),
    );
    const ok = results.filter((r) => r !== undefined);
    const format = combineFormats(ok.map((r) => r.format));
    let text = ok.map((r) => ensureNewlineText(stripEof(r.text))).join("");
    if (isOpenMetrics(format)) text += "# EOF\n";
    return { body: new TextEncoder().encode(text), format };
  }
}

async function readCapped(res: Response, max: number, url: string): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw new Error(`error scraping ${url}: answer larger than ${max} bytes`);
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

function ensureNewline(b: Uint8Array): Uint8Array {
  return b.length && b[b.length - 1] !== 0x0a ? Buffer.concat([b, NL]) : b;
}
function ensureNewlineText(s: string): string {
  return s && !s.endsWith("\n") ? s + "\n" : s;
}
const NL = new Uint8Array([0x0a]);

/**
 * One stream from several parts, read lazily and in order with backpressure. Only whole lines
 * are passed on: a part's unterminated last line gets its newline, and a part that fails mid-way
 * is cut at its last complete line (a half sample would spoil the whole page for Prometheus),
 * reported, and the next part follows.
 */
export function concatStreams(parts: Part[], onError: (index: number, e: unknown) => void): ReadableStream<Uint8Array> {
  let index = -1;
  let reader: { read(): Promise<{ done: boolean; value?: Uint8Array }>; cancel(reason?: unknown): Promise<void> } | undefined;
  let carry: Uint8Array | undefined;
  const nextPart = async (): Promise<boolean> => {
    while (++index < parts.length) {
      const p = await parts[index]!();
      if (!p) continue;
      reader = p instanceof Uint8Array ? singleChunk(p).getReader() : p.getReader();
      return true;
    }
    return false;
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        if (!reader && !(await nextPart())) return controller.close();
        let r: { done: boolean; value?: Uint8Array };
        try {
          r = await reader!.read();
        } catch (e) {
          onError(index, e);
          reader = undefined;
          carry = undefined;
          continue;
        }
        if (r.done) {
          reader = undefined;
          const rest = carry;
          carry = undefined;
          if (rest?.length) return controller.enqueue(Buffer.concat([rest, NL]));
          continue;
        }
        const chunk = r.value;
        if (!chunk || chunk.length === 0) continue;
        const nl = chunk.lastIndexOf(0x0a);
        if (nl < 0) {
          carry = carry ? Buffer.concat([carry, chunk]) : chunk;
          continue;
        }
        const head = chunk.subarray(0, nl + 1);
        const out = carry ? Buffer.concat([carry, head]) : head;
        carry = nl + 1 < chunk.length ? chunk.slice(nl + 1) : undefined;
        return controller.enqueue(out);
      }
    },
    async cancel(reason) {
      await reader?.cancel(reason).catch(() => {});
      for (let i = index + 1; i < parts.length; i++) {
        const p = await parts[i]!().catch(() => undefined);
        if (p && !(p instanceof Uint8Array)) await p.cancel(reason).catch(() => {});
      }
    },
  });
}

function singleChunk(b: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      c.enqueue(b);
      c.close();
    },
  });
}
