// A kubelet-like prober for the load cases: GET /healthz/ready every 10 ms (not waiting for the
// one before) from a process of its own, so the latencies it records are the agent's and not the
// busy test process's event loop. With each probe of the agent it probes a control at the same
// moment: a bare HTTP server in another process of its own, which shows what any process on this
// machine gets then (on a shared, overloaded machine both are slow; what the agent adds is the
// difference).
// stop() ends both and returns every latency and every failure (a probe unanswered within 5 s).

import { expect } from "bun:test";

const PROBER = `
const [agentPort, controlPort, everyMs] = process.argv.slice(-3).map(Number);
const agent = [], control = [], failures = [];
let running = true;
process.on("SIGTERM", () => (running = false));
async function probe(port, path) {
  const t0 = performance.now();
  try {
    const r = await fetch("http://127.0.0.1:" + port + path, { signal: AbortSignal.timeout(5000) });
    await r.arrayBuffer();
    return performance.now() - t0;
  } catch (e) {
    failures.push(port + ": " + String(e && e.message));
    return undefined;
  }
}
// A pair every everyMs, without waiting for the last: a probe arrives at every moment of a burst,
// as kubelets' probes do, and the control is probed at the same moments.
const inFlight = new Set();
let first = true;
while (running) {
  const pair = Promise.all([probe(agentPort, "/healthz/ready"), probe(controlPort, "/")]).then(([a, c]) => {
    if (a !== undefined && c !== undefined) (agent.push(a), control.push(c));
  });
  inFlight.add(pair);
  pair.finally(() => inFlight.delete(pair));
  if (first) (await pair, process.stdout.write("ready\\n"), (first = false));
  await Bun.sleep(everyMs);
}
await Promise.all(inFlight);
process.stdout.write(JSON.stringify({ ms: agent, control, failures }));
`;

const CONTROL = `
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
process.stdout.write(server.port + "\\n");
process.on("SIGTERM", () => process.exit(0));
`;

export interface ProbeResult {
  /** The agent's /healthz/ready latencies (ms). */
  ms: number[];
  /** The control server's latencies, probed at the same moments as the agent's. */
  control: number[];
  failures: string[];
}

export interface StatusProber {
  stop(): Promise<ProbeResult>;
}

async function readUntil(
  reader: { read(): Promise<{ value?: Uint8Array; done: boolean }> },
  state: { text: string },
  marker: string,
  what: string,
): Promise<void> {
  const dec = new TextDecoder();
  while (!state.text.includes(marker)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${what} exited early`);
    state.text += dec.decode(value, { stream: true });
  }
}

/** Starts the control server and the prober; resolves once the first probe is done, so the load that follows is covered. */
export async function startStatusProber(port: number, everyMs = 10): Promise<StatusProber> {
  const control = Bun.spawn([process.execPath, "-e", CONTROL], { stdout: "pipe", stderr: "inherit" });
  const cOut = { text: "" };
  await readUntil((control.stdout as ReadableStream<Uint8Array>).getReader(), cOut, "\n", "the control server");
  const controlPort = Number(cOut.text.trim());
  const proc = Bun.spawn([process.execPath, "-e", PROBER, String(port), String(controlPort), String(everyMs)], { stdout: "pipe", stderr: "inherit" });
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  const out = { text: "" };
  await readUntil(reader, out, "ready\n", "the status prober");
  out.text = out.text.slice(out.text.indexOf("ready\n") + 6);
  return {
    async stop() {
      proc.kill("SIGTERM");
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        out.text += dec.decode(value, { stream: true });
      }
      await proc.exited;
      control.kill("SIGTERM");
      await control.exited;
      return JSON.parse(out.text) as ProbeResult;
    },
  };
}

/** The q-quantile (nearest rank) of `xs`. */
export function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

export function summary(ms: readonly number[]): string {
  return `${ms.length} probes, p50 ${quantile(ms, 0.5).toFixed(0)} ms, p99 ${quantile(ms, 0.99).toFixed(0)} ms, max ${Math.max(...ms).toFixed(0)} ms, ${ms.filter((x) => x >= 100).length} at or over 100 ms`;
}

/**
 * The status port under load: every probe answered, within 100 ms at the 99th percentile (a
 * probe every 10 ms: 100–300 a case), the target issue 20 set. The port is served from a
 * thread of its own (src/status/listen.ts: the native responder, or a Worker with app probes),
 * so a burst on the agent's event loop does not
 * delay it; what can still delay it is the machine: on a shared, overloaded machine every process
 * waits for a CPU. The control server, probed right after each probe of the agent, shows what the
 * machine allowed at those moments: when its p99 is under 50 ms the target holds as stated;
 * otherwise the agent's p99 may exceed the control's by at most 100 ms. Never past the kubelet's
 * 1 s probe timeout. Before the thread, the agent's p99 was 191–923 ms against a control of
 * 8–72 ms.
 */
export const STATUS_TARGET_MS = 100;
export const QUIET_CONTROL_MS = 50;
export const CONTROL_MARGIN_MS = 100;
const KUBELET_TIMEOUT_MS = 1000;

/** The bound on the agent's p99 given the control's p99 (see above). */
export function statusBoundMs(controlP99: number): number {
  return Math.min(KUBELET_TIMEOUT_MS, controlP99 < QUIET_CONTROL_MS ? STATUS_TARGET_MS : controlP99 + CONTROL_MARGIN_MS);
}

export function expectStatusBounds(r: ProbeResult, what: string): void {
  expect(r.failures).toEqual([]);
  expect(r.ms.length).toBeGreaterThan(0);
  const controlP99 = quantile(r.control, 0.99);
  const bound = statusBoundMs(controlP99);
  console.log(
    `load: status port during ${what}: ${summary(r.ms)}; control server: p99 ${controlP99.toFixed(0)} ms, max ${Math.max(...r.control).toFixed(0)} ms; bound ${bound.toFixed(0)} ms`,
  );
  expect(quantile(r.ms, 0.99)).toBeLessThanOrEqual(bound);
}
