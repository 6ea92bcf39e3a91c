// The status port's listener, on a thread of its own (a Bun Worker started by statusthread.ts).
// The agent's event loop may be busy for hundreds of milliseconds answering a burst (200 SDS
// streams, 10,000 pushes); a kubelet's probe queued behind it would wait as long. Here it does
// not: this thread accepts connections and answers `/healthz/ready` itself, with the checks the
// status server uses (Envoy's admin stats, the gRPC bootstrap file) over the agent's readiness
// conditions as the main thread last sent them, and the kubelet's app probes (/app-health/,
// /app-lifecycle/) when the pod has any, sending them on to the application from here. Every
// other request goes to the main thread's StatusServer.handle with the client's address, and its
// answer comes back here. Small on purpose: it loads only the readiness modules, and the probers
// only when there are app probes, so the thread costs little memory.

import { errorMessage } from "../lib/errors.ts";
import { explainCondition, type BlockerState } from "../lib/readiness.ts";
import { EnvoyReadinessProbe } from "./envoyready.ts";
import { GrpcBootstrapProbe } from "./grpcbootstrap.ts";
import { ReadyAnswer } from "./readyanswer.ts";
import { ReadyCheck } from "./readycheck.ts";
import type { FromStatusThread, ThreadReadinessConfig, ToStatusThread } from "./statusthread.ts";
import type { AppProbeThreadConfig } from "./server.ts";
import type { AppProbeHandler } from "./apphandler.ts";

interface Waiting {
  resolve(r: Response): void;
  stream?: ReadableStreamDefaultController<Uint8Array>;
}

interface Port {
  postMessage(m: FromStatusThread): void;
  onmessage: ((e: MessageEvent<ToStatusThread>) => void) | null;
}

/** The thread's answer to /healthz/ready, over the conditions the main thread sends; `now` is the thread's clock. */
function threadReadiness(cfg: ThreadReadinessConfig, port: Port, now: () => number) {
  let conditions = { blockers: cfg.blockers, warnings: cfg.warnings };
  const shutdown = new AbortController();
  const envoy = cfg.envoy ? new EnvoyReadinessProbe({ ...cfg.envoy, shutdown: shutdown.signal }) : undefined;
  const readiness = {
    blockers: () => conditions.blockers,
    warnings: () => conditions.warnings,
    explain: (s: BlockerState) => explainCondition(s, now()),
  };
  const check = new ReadyCheck({
    readiness,
    envoy,
    grpcBootstrap: cfg.grpcBootstrap ? new GrpcBootstrapProbe(cfg.grpcBootstrap.path, cfg.grpcBootstrap.root) : undefined,
  });
  const answer = new ReadyAnswer({
    check,
    info: (message) => port.postMessage({ type: "log", level: "info", message }),
    warn: (message) => port.postMessage({ type: "log", level: "warn", message }),
    firstReady: (seconds) => port.postMessage({ type: "first ready", seconds }),
    now,
    processStartMs: cfg.processStartMs,
  });
  return {
    answer: () => answer.answer(),
    conditions: (c: typeof conditions) => (conditions = c),
    envoyRestarted: () => envoy?.reset(),
    shutdown: (reason: string | undefined) => shutdown.abort(reason === undefined ? undefined : new Error(reason)),
  };
}

/** The app probes' handler on this thread; its log lines go to the main thread's "probes" scope. */
async function threadAppProbes(cfg: AppProbeThreadConfig, port: Port, statusPort: () => number): Promise<AppProbeHandler> {
  const [{ AppProbeHandler }, { parseAppProbers }] = await Promise.all([import("./apphandler.ts"), import("./appprobers.ts")]);
  return new AppProbeHandler({
    probers: parseAppProbers(cfg.probers),
    destination: cfg.destination,
    sourceAddress: cfg.sourceAddress,
    keepAlive: cfg.keepAlive,
    statusPort,
    log: {
      info: (message) => port.postMessage({ type: "log", level: "info", message, scope: "probes" }),
      error: (message) => port.postMessage({ type: "log", level: "error", message, scope: "probes" }),
    },
  });
}

function isAppProbePath(path: string): boolean {
  return path.startsWith("/app-health/") || path.startsWith("/app-lifecycle/");
}

export function runStatusThread(port: Port, now: () => number): void {
  let server: ReturnType<typeof Bun.serve> | undefined;
  let apps: Promise<AppProbeHandler> | undefined;
  let readiness: ReturnType<typeof threadReadiness> | undefined;
  const waiting = new Map<number, Waiting>();
  let nextId = 1;

  const forward = (req: Request, remote: string | undefined): Promise<Response> => {
    const id = nextId++;
    const headers: [string, string][] = [];
    req.headers.forEach((v, k) => headers.push([k, v]));
    port.postMessage({ type: "request", id, method: req.method, url: req.url, headers, remote });
    return new Promise((resolve) => waiting.set(id, { resolve }));
  };

  const handle = (req: Request, remote: string | undefined): Response | Promise<Response> => {
    const path = new URL(req.url).pathname;
    if (apps && isAppProbePath(path)) {
      return apps
        .then((a) => a.handle(path, req))
        .catch((err: unknown) => {
          const message = errorMessage(err);
          port.postMessage({ type: "log", level: "error", message: `${req.method} ${path}: ${message}` });
          return new Response(message, { status: 500, headers: { "content-type": "text/plain; charset=utf-8" } });
        });
    }
    if (readiness && path === "/healthz/ready") {
      return readiness.answer().catch((err: unknown) => {
        const message = errorMessage(err);
        port.postMessage({ type: "log", level: "error", message: `GET /healthz/ready: ${message}` });
        return new Response(message, { status: 500, headers: { "content-type": "text/plain; charset=utf-8" } });
      });
    }
    return forward(req, remote);
  };

  port.onmessage = (e) => {
    const m = e.data;
    switch (m.type) {
      case "listen":
        readiness = threadReadiness(m.readiness, port, now);
        if (m.apps) {
          apps = threadAppProbes(m.apps, port, () => server?.port ?? m.port);
          // Said once here; each probe then answers 500 with the reason (no unhandled rejection).
          apps.catch((err: unknown) => port.postMessage({ type: "log", level: "error", message: `app probes: ${errorMessage(err)}` }));
        }
        try {
          server = Bun.serve({
            port: m.port,
            hostname: m.hostname,
            idleTimeout: m.idleTimeout,
            fetch: (req, s) => handle(req, s.requestIP(req)?.address),
            error: (err) => {
              port.postMessage({ type: "log", level: "error", message: `status server: ${errorMessage(err)}` });
              return new Response("internal error\n", { status: 500 });
            },
          });
          port.postMessage({ type: "listening", port: server.port ?? 0, hostname: server.hostname ?? "" });
        } catch (err) {
          port.postMessage({ type: "listen-failed", message: errorMessage(err) });
        }
        break;
      case "conditions":
        readiness?.conditions({ blockers: m.blockers, warnings: m.warnings });
        break;
      case "envoy restarted":
        readiness?.envoyRestarted();
        break;
      case "shutdown":
        readiness?.shutdown(m.reason);
        break;
      case "response": {
        const w = waiting.get(m.id);
        if (!w) break;
        if (!m.more) {
          waiting.delete(m.id);
          w.resolve(new Response(m.body, { status: m.status, headers: m.headers }));
          break;
        }
        const id = m.id;
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            w.stream = c;
            if (m.body) c.enqueue(m.body);
          },
          // The client went away: the chunks still coming for it are dropped.
          cancel: () => void waiting.delete(id),
        });
        w.resolve(new Response(body, { status: m.status, headers: m.headers }));
        break;
      }
      case "chunk":
        try {
          waiting.get(m.id)?.stream?.enqueue(m.data);
        } catch {
          waiting.delete(m.id); // the stream was closed under us (client gone)
        }
        break;
      case "end": {
        const w = waiting.get(m.id);
        waiting.delete(m.id);
        try {
          if (m.error) w?.stream?.error(new Error(m.error));
          else w?.stream?.close();
        } catch {
          // already closed: the client went away
        }
        break;
      }
      case "stop":
        void (async () => {
          await server?.stop(true);
          (await apps?.catch(() => undefined))?.close();
          port.postMessage({ type: "stopped" });
        })();
        break;
    }
  };
}

declare const self: Port;
// The thread's own root: its clock is the system's, as the agent's is in production.
runStatusThread(self, () => Date.now());
