// The status port served from a Worker thread of its own (statusthread.worker.ts): used when the
// pod has app probes, or when the native responder (nativelisten.ts) is not available (listen.ts
// chooses). So the kubelet's readiness probe is answered within milliseconds even while the
// agent's event loop is busy with a burst (200 SDS streams, 10,000 pushes). The thread answers
// `/healthz/ready` itself, with the status server's own checks (ReadyAnswer, ReadyCheck, the
// Envoy admin query, the gRPC bootstrap file) over the agent's readiness conditions, which this
// side sends it at start and
// on every change (raised, cleared, failed), with Envoy restarts and the start of shutdown. Every
// other request goes back to the main thread's StatusServer.handle with the client's address,
// and its answer returns to the thread, streamed when it comes in more than one chunk.

import { errorMessage } from "../lib/errors.ts";
import type { BlockerState } from "../lib/readiness.ts";
import { inlineListen, type AppProbeThreadConfig, type ReadinessChange, type ReadinessFeed, type StatusListener, type StatusListen } from "./server.ts";

export interface ThreadReadinessConfig {
  envoy?: ReadinessFeed["envoy"];
  grpcBootstrap?: ReadinessFeed["grpcBootstrap"];
  processStartMs: number;
  blockers: BlockerState[];
  warnings: BlockerState[];
}

export type ToStatusThread =
  | { type: "listen"; port: number; hostname: string; idleTimeout: number; readiness: ThreadReadinessConfig; apps?: AppProbeThreadConfig }
  | { type: "conditions"; blockers: BlockerState[]; warnings: BlockerState[] }
  | { type: "envoy restarted" }
  | { type: "shutdown"; reason?: string }
  | { type: "response"; id: number; status: number; headers: [string, string][]; body: Uint8Array; more: boolean }
  | { type: "chunk"; id: number; data: Uint8Array }
  | { type: "end"; id: number; error?: string }
  | { type: "stop" };

export type FromStatusThread =
  | { type: "listening"; port: number; hostname: string }
  | { type: "listen-failed"; message: string }
  | { type: "request"; id: number; method: string; url: string; headers: [string, string][]; remote: string | undefined }
  | { type: "log"; level: "info" | "warn" | "error"; message: string; scope?: "probes" }
  | { type: "first ready"; seconds: number }
  | { type: "stopped" };

/** How long stop() waits for the thread to close its listener before ending it. */
const STOP_GRACE_MS = 2000;
/** Binds the main thread's fallback listener tries, RETRY_MS apart, after the thread has ended. */
const FALLBACK_BINDS = 10;
const FALLBACK_RETRY_MS = 100;

export interface ThreadListenOptions {
  /** Makes the thread (tests keep a handle on it to end it). */
  newWorker?: (specifier: string) => Worker;
}

/**
 * Where the thread's code is: beside this file when run from source; in the compiled binary,
 * an extra entry point of `bun build --compile` (build.ts), named relative to src/main.ts.
 */
function workerSpecifier(): string {
  return Bun.main.startsWith("/$bunfs/") ? "./status/statusthread.worker.ts" : new URL("./statusthread.worker.ts", import.meta.url).href;
}

/** Sends `res` to the thread as request `id`: whole when it is one chunk, else chunk by chunk. */
async function sendResponse(worker: Worker, id: number, res: Response): Promise<void> {
  const headers: [string, string][] = [];
  res.headers.forEach((v, k) => headers.push([k, v]));
  const reader = res.body?.getReader();
  const first = reader ? await reader.read() : { done: true as const, value: undefined };
  const second = first.done || !reader ? first : await reader.read();
  const body = first.value ?? new Uint8Array(0);
  if (second.done) {
    worker.postMessage({ type: "response", id, status: res.status, headers, body, more: false } satisfies ToStatusThread);
    return;
  }
  worker.postMessage({ type: "response", id, status: res.status, headers, body, more: true } satisfies ToStatusThread);
  try {
    let r: { done: boolean; value?: Uint8Array } = second;
    while (!r.done) {
      worker.postMessage({ type: "chunk", id, data: r.value! } satisfies ToStatusThread);
      r = await reader!.read();
    }
    worker.postMessage({ type: "end", id } satisfies ToStatusThread);
  } catch (e) {
    worker.postMessage({ type: "end", id, error: errorMessage(e) } satisfies ToStatusThread);
  }
}

/**
 * Binds the port on the main thread once the status thread has ended by itself, so the kubelet's
 * probes keep being answered (by the main thread's handler, readiness included) instead of finding
 * the port closed. The thread's listener is gone with it; a bind may still lose a short race with
 * the kernel's release, hence a few tries.
 */
async function fallBackToMainThread(
  onError: (message: string) => void,
  hostname: string,
  port: number,
  handle: Parameters<StatusListen>[2],
  feed: ReadinessFeed,
): Promise<StatusListener | undefined> {
  let last: unknown;
  for (let i = 0; i < FALLBACK_BINDS; i++) {
    try {
      return await inlineListen(onError)(hostname, port, handle, feed);
    } catch (e) {
      last = e;
      await Bun.sleep(FALLBACK_RETRY_MS);
    }
  }
  onError(`status port ${port}: cannot serve it from the main thread either: ${errorMessage(last)}`);
  return undefined;
}

/**
 * A StatusListen that binds the port on a thread of its own. `onError` hears the thread's errors.
 * Should the thread end after it has bound the port (an uncaught error), the main thread serves
 * the port from then on.
 */
export function threadListen(onError: (message: string) => void, opts: ThreadListenOptions = {}): StatusListen {
  return (hostname, port, handle, feed) =>
    new Promise<StatusListener>((resolve, reject) => {
      // smol: a small heap, which this thread needs (it holds a few strings and one listener).
      const worker = opts.newWorker ? opts.newWorker(workerSpecifier()) : new Worker(workerSpecifier(), { smol: true });
      let stopped: (() => void) | undefined;
      let stopping = false;
      let listening = false;
      /** The main thread's listener once the thread has ended by itself. */
      let fallback: Promise<StatusListener | undefined> | undefined;
      worker.onerror = (e) => {
        onError(`status thread: ${e.message}`);
        reject(new Error(`status thread failed to start: ${e.message}`));
      };
      worker.addEventListener("close", () => {
        stopped?.();
        if (!listening || stopping) return;
        onError(`status thread ended unexpectedly; the main thread serves port ${port} from now on`);
        fallback = fallBackToMainThread(onError, hostname, port, handle, feed);
      });
      worker.onmessage = (e: MessageEvent<FromStatusThread>) => {
        const m = e.data;
        switch (m.type) {
          case "listening":
            listening = true;
            // The fallback (if any) binds the port the thread had, even when 0 asked for any.
            port = m.port;
            resolve({
              port: m.port,
              hostname: m.hostname,
              readinessChanged: (change: ReadinessChange) => {
                // The main thread's fallback reads the agent's readiness itself.
                if (fallback) return;
                if (change.kind === "conditions") worker.postMessage({ type: "conditions", ...feed.conditions() } satisfies ToStatusThread);
                else if (change.kind === "shutdown") worker.postMessage({ type: "shutdown", reason: change.reason } satisfies ToStatusThread);
                else worker.postMessage({ type: "envoy restarted" } satisfies ToStatusThread);
              },
              stop: async () => {
                stopping = true;
                if (fallback) return (await fallback)?.stop();
                const done = new Promise<void>((r) => (stopped = r));
                worker.postMessage({ type: "stop" } satisfies ToStatusThread);
                await Promise.race([done, Bun.sleep(STOP_GRACE_MS)]);
                worker.terminate();
              },
            });
            break;
          case "listen-failed":
            worker.terminate();
            reject(new Error(m.message));
            break;
          case "request": {
            const fail = (err: unknown) => {
              const message = errorMessage(err);
              onError(`status thread: ${m.method} ${m.url}: ${message}`);
              const body = new TextEncoder().encode("internal error\n");
              worker.postMessage({ type: "response", id: m.id, status: 500, headers: [], body, more: false } satisfies ToStatusThread);
            };
            try {
              const req = new Request(m.url, { method: m.method, headers: m.headers });
              void handle(req, m.remote)
                .then((res) => sendResponse(worker, m.id, res))
                .catch(fail);
            } catch (err) {
              fail(err);
            }
            break;
          }
          case "log":
            if (m.scope === "probes" && feed.probeLog) feed.probeLog(m.level === "warn" ? "info" : m.level, m.message);
            else if (m.level === "error") onError(m.message);
            else feed.log(m.level, m.message);
            break;
          case "first ready":
            feed.firstReady(m.seconds);
            break;
          case "stopped":
            stopped?.();
            break;
        }
      };
      const readiness: ThreadReadinessConfig = {
        ...(feed.envoy ? { envoy: feed.envoy } : {}),
        ...(feed.grpcBootstrap ? { grpcBootstrap: feed.grpcBootstrap } : {}),
        processStartMs: feed.processStartMs,
        ...feed.conditions(),
      };
      worker.postMessage({ type: "listen", port, hostname, idleTimeout: 120, readiness, ...(feed.apps ? { apps: feed.apps } : {}) } satisfies ToStatusThread);
    });
}
