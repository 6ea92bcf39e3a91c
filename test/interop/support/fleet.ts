// A fleet of pods against one istiod-lite, for the fleet benchmark (bench/fleet.ts) and its
// behavioural test (test/interop/fleet.test.ts): N agents (ours or Istio's pilot-agent), each in
// its own pod directory with its own identity (token fleet:<ns>:pod-<i>, istiod-lite's
// --fleet-tokens) and ports, all started at once; every pod's Envoy played by one fleet-envoy
// process (test/interop/fleet-envoy), which records every response each pod saw and reports when
// each pod is ready and when each pod ACKed each change.

import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../../support/ports.ts";
import { FLEET_ENVOY } from "./go-build.ts";
import { startIstiodLite, type IstiodLite, type LiteRecord } from "./istiod-lite.ts";
import { FLEET_NAMESPACE, FleetMesh, type MeshShape } from "./fleet-config.ts";

/** Unix time in milliseconds with sub-millisecond precision (the stand-ins report the same clock). */
export const nowMs = (): number => performance.timeOrigin + performance.now();

export type XdsMode = "sotw" | "delta";

export interface FleetOptions {
  /** The agent binary (dist/agent or Istio's pilot-agent). */
  bin: string;
  pods: number;
  mode: XdsMode;
  mesh: MeshShape;
  /** Folder for the pods (created). */
  work: string;
  /** Istio's bootstrap template (agent-run.ts istioBootstrapTemplate()). */
  template: string;
  log?: (line: string) => void;
}

/** One pod as fleet-envoy dumps it. */
export interface PodDump {
  streams: Record<string, number>;
  responses: { t: number; stream: string; type: string; version: string; nonce: string; n: number; removed?: number; ack: boolean; error?: string }[];
  dropped: number;
  state: Record<string, Record<string, string>>;
  acked: Record<string, number>;
  nacked: Record<string, number>;
  seen: string[];
  duplicates: number;
}

interface EnvoyEvent {
  event: string;
  id?: string;
  pod?: string;
  t?: number;
  message?: string;
  pods?: Record<string, PodDump>;
  healthz?: number;
  cert?: number;
  config?: number;
}

/** The fleet-envoy process: commands on stdin, events (JSON lines) on stdout. */
class StandIns {
  private proc: ReturnType<typeof Bun.spawn>;
  private waiters: ((e: EnvoyEvent) => boolean)[] = [];
  readonly events: EnvoyEvent[] = [];
  readonly errors: string[] = [];
  private seq = 0;

  constructor(logFile: string) {
    this.proc = Bun.spawn([FLEET_ENVOY], { stdin: "pipe", stdout: "pipe", stderr: Bun.file(logFile) });
    void this.read();
  }

  get pid(): number {
    return this.proc.pid;
  }

  private async read(): Promise<void> {
    const dec = new TextDecoder();
    let buf = "";
    for await (const chunk of this.proc.stdout as ReadableStream<Uint8Array>) {
      buf += dec.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        const e = JSON.parse(line) as EnvoyEvent;
        if (e.event === "error") this.errors.push(e.message ?? line);
        if (e.event !== "dump") this.events.push(e);
        this.waiters = this.waiters.filter((w) => !w(e));
      }
    }
  }

  /** Calls `fn` with every event from now until it returns true. */
  watch(fn: (e: EnvoyEvent) => boolean): void {
    this.waiters.push(fn);
  }

  send(cmd: Record<string, unknown>): void {
    const sink = this.proc.stdin as import("bun").FileSink;
    sink.write(JSON.stringify(cmd) + "\n");
    sink.flush();
  }

  /** Resolves with the first event (from now) `ok` accepts; rejects after `ms`. */
  next(what: string, ok: (e: EnvoyEvent) => boolean, ms: number): Promise<EnvoyEvent> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`fleet-envoy: ${what}: not within ${ms} ms; errors: ${this.errors.slice(-5).join(" | ")}`)), ms);
      this.watch((e) => {
        if (!ok(e)) return false;
        clearTimeout(timer);
        resolve(e);
        return true;
      });
    });
  }

  async mark(id: string, text: string): Promise<void> {
    const done = this.next(`mark ${id}`, (e) => e.event === "marked" && e.id === id, 10_000);
    this.send({ cmd: "mark", id, text });
    await done;
  }

  async dump(since = 0): Promise<Record<string, PodDump>> {
    const id = `d${this.seq++}`;
    const done = this.next(`dump ${id}`, (e) => e.event === "dump" && e.id === id, 30_000);
    this.send({ cmd: "dump", id, since });
    return (await done).pods!;
  }

  async stop(): Promise<void> {
    this.proc.kill("SIGKILL");
    await this.proc.exited;
  }
}

/** The Envoy launcher every pod's agent starts: records its arguments for fleet-envoy, then idles. */
const LAUNCHER = `#!/bin/sh
echo $$ > "$PWD/envoy-pid"
printf '%s\\0' "$@" > "$PWD/envoy-args.tmp"
mv "$PWD/envoy-args.tmp" "$PWD/envoy-args"
exec sleep 2147483647
`;

export interface Pod {
  id: string;
  name: string;
  dir: string;
  statusPort: number;
  proc?: ReturnType<typeof Bun.spawn>;
}

/** What istiod saw per pod: CSRs (by token) and xDS streams (by node id), from its records. */
export interface IstiodCounts {
  csrs: Map<string, number>;
  streams: Map<string, number>;
  /** CSRs and streams no pod of the fleet can be named for. */
  unknown: number;
}

export function countsOf(records: LiteRecord[]): IstiodCounts {
  const csrs = new Map<string, number>();
  const streams = new Map<string, number>();
  let unknown = 0;
  for (const r of records) {
    if (r.kind === "csr") {
      const sa = /^Bearer fleet:[^:]+:(.+)$/.exec(r.metadata["authorization"]?.[0] ?? "")?.[1];
      if (sa) csrs.set(sa, (csrs.get(sa) ?? 0) + 1);
      else unknown++;
    } else {
      const name = /^[a-z]+~[^~]*~([^.~]+)\./.exec(r.node.id ?? "")?.[1];
      if (name) streams.set(name, (streams.get(name) ?? 0) + 1);
      else unknown++;
    }
  }
  return { csrs, streams, unknown };
}

export class Fleet {
  readonly pods: Pod[] = [];
  readonly mesh: FleetMesh;
  private constructor(
    readonly o: FleetOptions,
    readonly lite: IstiodLite,
    readonly envoys: StandIns,
    private controlPort: number,
  ) {
    this.mesh = new FleetMesh(o.mesh);
  }

  /** istiod-lite serving the mesh, and fleet-envoy, both up; no pod yet. */
  static async start(o: FleetOptions): Promise<Fleet> {
    mkdirSync(o.work, { recursive: true });
    const mesh = new FleetMesh(o.mesh);
    const controlPort = await freePort();
    const lite = await startIstiodLite(mesh.yaml(), { args: ["--fleet-tokens", "--control-port", String(controlPort)] });
    const f = new Fleet(o, lite, new StandIns(join(o.work, "fleet-envoy.log")), controlPort);
    writeFileSync(join(o.work, "envoy"), LAUNCHER);
    chmodSync(join(o.work, "envoy"), 0o755);
    return f;
  }

  private async preparePod(i: number): Promise<{ pod: Pod; env: Record<string, string> }> {
    const name = `fleet-${i}`;
    const dir = join(this.o.work, name);
    if (existsSync(dir)) throw new Error(`pod directory ${dir} exists: give the fleet a fresh work folder`);
    for (const d of ["var/run/secrets/tokens", "var/run/secrets/istio", "var/lib/istio/envoy"]) mkdirSync(join(dir, d), { recursive: true });
    writeFileSync(join(dir, "var/run/secrets/tokens/istio-token"), `fleet:${FLEET_NAMESPACE}:pod-${i}`);
    writeFileSync(join(dir, "var/run/secrets/istio/root-cert.pem"), this.lite.rootPem);
    copyFileSync(this.o.template, join(dir, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"));
    const [statusPort, adminPort, dnsPort] = [await freePort(), await freePort(), await freePort()];
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: dir,
      POD_NAME: name,
      POD_NAMESPACE: FLEET_NAMESPACE,
      SERVICE_ACCOUNT: `pod-${i}`,
      INSTANCE_IP: `10.10.${i >> 8}.${(i & 255) + 1}`,
      CLOUD_PLATFORM: "none",
      CA_ADDR: this.lite.caAddress,
      ISTIO_DELTA_XDS: String(this.o.mode === "delta"),
      ISTIO_META_DNS_CAPTURE: "true",
      DNS_PROXY_ADDR: `127.0.0.1:${dnsPort}`,
      PROXY_CONFIG: JSON.stringify({
        discoveryAddress: this.lite.xdsAddress,
        binaryPath: join(this.o.work, "envoy"),
        statusPort,
        proxyAdminPort: adminPort,
        drainDuration: "1s",
        terminationDrainDuration: "1s",
      }),
    };
    return { pod: { id: `p${i}`, name, dir, statusPort }, env };
  }

  /**
   * The start storm: every pod prepared, told to fleet-envoy, then every agent spawned at once.
   * Resolves when every pod is ready (/healthz/ready 200, certificate in, CDS and LDS ACKed) with
   * the spawn moment and each pod's ready time.
   */
  async storm(timeoutMs: number): Promise<{ t0: number; ready: Map<string, number> }> {
    const prepared = [];
    for (let i = 0; i < this.o.pods; i++) prepared.push(await this.preparePod(i));
    for (const { pod } of prepared) this.envoys.send({ cmd: "pod", pod: pod.id, dir: pod.dir, statusPort: pod.statusPort, mode: this.o.mode });
    const ready = new Map<string, number>();
    const all = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `start storm: ${ready.size} of ${this.o.pods} pods ready within ${timeoutMs} ms; not ready: ${this.pods
                .filter((p) => !ready.has(p.id))
                .slice(0, 5)
                .map((p) => `${p.name} (${this.agentLogTail(p)})`)
                .join("; ")}; fleet-envoy errors: ${this.envoys.errors.slice(-5).join(" | ")}`,
            ),
          ),
        timeoutMs,
      );
      const check = (e: EnvoyEvent) => {
        if (e.event === "ready") ready.set(e.pod!, e.t!);
        if (ready.size < this.o.pods) return false;
        clearTimeout(timer);
        resolve();
        return true;
      };
      this.envoys.watch(check);
    });
    const t0 = nowMs();
    for (const { pod, env } of prepared) {
      pod.proc = Bun.spawn([this.o.bin, "proxy", "sidecar"], { cwd: pod.dir, env, stdout: Bun.file(join(pod.dir, "agent.log")), stderr: "pipe" });
      this.pods.push(pod);
    }
    for (const p of this.pods) void this.pumpStderr(p);
    await all;
    return { t0, ready };
  }

  private stderrs = new Map<string, string>();
  private async pumpStderr(p: Pod): Promise<void> {
    const dec = new TextDecoder();
    for await (const c of p.proc!.stderr as ReadableStream<Uint8Array>) this.stderrs.set(p.id, ((this.stderrs.get(p.id) ?? "") + dec.decode(c)).slice(-4000));
  }

  agentLogTail(p: Pod): string {
    const out = existsSync(join(p.dir, "agent.log")) ? readFileSync(join(p.dir, "agent.log"), "utf8") : "";
    return `exit=${p.proc?.exitCode ?? "running"} ${(out + (this.stderrs.get(p.id) ?? "")).split("\n").slice(-4).join(" / ")}`;
  }

  /**
   * One change at istiod: the mark registered with the stand-ins, the config folder updated (a
   * restart serves it too), the change applied through istiod-lite's control endpoint. Resolves
   * with each pod's time from the apply to its ACK of the resource carrying the mark.
   */
  async change(kind: "small" | "large", largeEndpoints: number, timeoutMs: number): Promise<{ id: string; latencies: number[] }> {
    const c = kind === "small" ? this.mesh.smallChange() : this.mesh.largeChange(largeEndpoints);
    const id = `${kind}-${c.mark}`;
    await this.envoys.mark(id, c.mark);
    this.lite.setConfig(this.mesh.yaml());
    const seen = new Map<string, number>();
    const all = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`change ${id}: ${seen.size} of ${this.o.pods} pods ACKed it within ${timeoutMs} ms; errors: ${this.envoys.errors.slice(-3).join(" | ")}`),
          ),
        timeoutMs,
      );
      this.envoys.watch((e) => {
        if (e.event === "seen" && e.id === id) seen.set(e.pod!, e.t!);
        if (seen.size < this.o.pods) return false;
        clearTimeout(timer);
        resolve();
        return true;
      });
    });
    const t0 = nowMs();
    const r = await fetch(`http://127.0.0.1:${this.controlPort}/apply`, { method: "POST", body: c.yaml, signal: AbortSignal.timeout(30_000) });
    if (!r.ok) throw new Error(`istiod-lite /apply: ${r.status} ${await r.text()}`);
    await all;
    return { id, latencies: [...seen.values()].map((t) => t - t0) };
  }

  dump(since = 0): Promise<Record<string, PodDump>> {
    return this.envoys.dump(since);
  }

  /** What istiod recorded (requests.jsonl, across restarts) per pod. */
  counts(): IstiodCounts {
    return countsOf(this.lite.records());
  }

  /** istiod-lite's own counters (GET /counters) per pod, since the running process started. */
  async counters(): Promise<{ csrs: Map<string, number>; streams: Map<string, number> }> {
    const r = await fetch(`http://127.0.0.1:${this.controlPort}/counters`, { signal: AbortSignal.timeout(10_000) });
    if (!r.ok) throw new Error(`istiod-lite /counters: ${r.status}`);
    const c = (await r.json()) as { csr: Record<string, number>; xds: Record<string, number> };
    // Keyed by <namespace>/<service account>; the pod's service account is pod-<i>, its name fleet-<i>.
    const sa = (k: string) => k.slice(k.indexOf("/") + 1);
    return {
      csrs: new Map(Object.entries(c.csr).map(([k, n]) => [sa(k), n])),
      streams: new Map(Object.entries(c.xds).map(([k, n]) => [sa(k).replace(/^pod-/, "fleet-"), n])),
    };
  }

  /**
   * istiod restarted (stopped, started on the same ports with the same root and the config
   * folder as changed): resolves when every pod has ACKed CDS and LDS again, with the stop moment,
   * the new server's up moment, and each pod's time back.
   */
  async restart(timeoutMs: number): Promise<{ tStop: number; tUp: number; back: Map<string, number> }> {
    const tStop = nowMs();
    await this.lite.restart();
    const tUp = nowMs();
    const deadline = tUp + timeoutMs;
    for (;;) {
      const pods = await this.dump(tStop);
      const back = new Map<string, number>();
      for (const [id, d] of Object.entries(pods)) {
        const first = (type: string) => d.responses.find((r) => r.ack && r.type === type)?.t;
        const c = first("Cluster");
        const l = first("Listener");
        if (c !== undefined && l !== undefined) back.set(id, Math.max(c, l));
      }
      if (back.size === this.o.pods) return { tStop, tUp, back };
      if (nowMs() > deadline) throw new Error(`istiod restart: ${back.size} of ${this.o.pods} pods had CDS and LDS again within ${timeoutMs} ms`);
      await Bun.sleep(500);
    }
  }

  async stop(): Promise<void> {
    for (const p of this.pods) if (p.proc && p.proc.exitCode === null) p.proc.kill("SIGKILL");
    await Promise.all(this.pods.map((p) => p.proc?.exited));
    for (const p of this.pods) {
      const pidFile = join(p.dir, "envoy-pid");
      if (!existsSync(pidFile)) continue;
      try {
        process.kill(Number(readFileSync(pidFile, "utf8")), "SIGKILL");
      } catch {
        // already gone
      }
    }
    await this.envoys.stop();
    await this.lite.stop();
  }
}
