// Starts istiod-lite (Istio's discovery server and CA on loopback, see istiod-lite/main.go) as a
// child process and reads what it recorded: the Node of each xDS stream's first request and
// every CSR with its gRPC metadata.

import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ISTIOD_LITE } from "./go-build.ts";

/** The bearer token istiod-lite accepts (its FakeAuthenticator's). */
export const LITE_TOKEN = "interop-token";
/** The identity Istio's FakeAuthenticator gives every authenticated caller. */
export const LITE_NAMESPACE = "fake-namespace";
export const LITE_SERVICE_ACCOUNT = "fake-sa";
export const LITE_SPIFFE = `spiffe://cluster.local/ns/${LITE_NAMESPACE}/sa/${LITE_SERVICE_ACCOUNT}`;

export interface XdsRecord {
  kind: "xds";
  method: string;
  typeUrl: string;
  metadata: Record<string, string[]>;
  node: { id?: string; cluster?: string; metadata?: Record<string, unknown>; locality?: Record<string, string>; userAgentName?: string; [k: string]: unknown };
}
export interface CsrRecord {
  kind: "csr";
  method: string;
  metadata: Record<string, string[]>;
  request: { csr: string; validityDuration?: string; metadata?: unknown };
}
export type LiteRecord = XdsRecord | CsrRecord;

export interface IstiodLite {
  xdsAddress: string;
  caAddress: string;
  rootCertPath: string;
  rootPem: string;
  records(): LiteRecord[];
  /** Write the YAML served from the next (re)start. */
  setConfig(yaml: string): void;
  /** Stop (SIGTERM) and start again on the same ports with the same root. */
  restart(): Promise<void>;
  /** Stop serving (SIGTERM) until `up`: the CA and discovery server are unreachable meanwhile. */
  down(): Promise<void>;
  /** Start again after `down`, on the same ports with the same root. */
  up(): Promise<void>;
  /**
   * Replace the mesh config's caCertificates (PEM) and have istiod-lite re-read them (SIGHUP):
   * resolves once it has reloaded, so a push of the new trust bundle is under way. Only for a
   * server started with `meshCaCertificates`.
   */
  reloadMeshCaCertificates(pem: string): Promise<void>;
  /** Lines it wrote on stderr, for failure messages. */
  log(): string;
  /** The running server's process id (a new one after each restart). */
  pid(): number;
  stop(): Promise<void>;
}

interface Ready {
  xdsPort: number;
  caPort: number;
  rootCert: string;
  requests: string;
}

export interface LiteOptions {
  /**
   * Serve PCDS as istiod does with ISTIO_MULTIROOT_MESH=true: the trust bundle is the CA's root
   * plus these certificates (PEM), the mesh config's caCertificates.
   */
  meshCaCertificates?: string;
  /** Hold each xDS stream's first response (and so its headers) this long: a Go duration, e.g. "7s". */
  firstResponseDelay?: string;
  /** Sign each workload certificate for the validity its request asks for (SECRET_TTL), not 24h. */
  honorRequestedTtl?: boolean;
  /** More flags (istiod-lite/fleet.go's --fleet-tokens, --control-port), kept across restarts. */
  args?: string[];
}

export async function startIstiodLite(yaml = "", opts: LiteOptions = {}): Promise<IstiodLite> {
  const work = mkdtempSync(join(tmpdir(), "istiod-lite-"));
  const configDir = join(work, "config");
  const stateDir = join(work, "state");
  const caCertsFile = join(work, "mesh-ca-certificates.pem");
  mkdirSync(configDir);
  writeFileSync(join(configDir, "config.yaml"), yaml);
  if (opts.meshCaCertificates !== undefined) writeFileSync(caCertsFile, opts.meshCaCertificates);
  let stderr = "";
  let stdout = "";
  let proc: ReturnType<typeof Bun.spawn> | undefined;

  const launch = async (ports?: Ready): Promise<Ready> => {
    const args = [ISTIOD_LITE, "--config", configDir, "--state", stateDir];
    if (ports) args.push("--xds-port", String(ports.xdsPort), "--ca-port", String(ports.caPort));
    if (opts.firstResponseDelay) args.push("--first-response-delay", opts.firstResponseDelay);
    if (opts.honorRequestedTtl) args.push("--honor-requested-ttl");
    args.push(...(opts.args ?? []));
    const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: work };
    if (opts.meshCaCertificates !== undefined) {
      args.push("--mesh-ca-certificates", caCertsFile);
      env.ISTIO_MULTIROOT_MESH = "true";
    }
    const p = Bun.spawn(args, { stdout: "pipe", stderr: "pipe", env });
    proc = p;
    void (async () => {
      for await (const c of p.stderr as ReadableStream<Uint8Array>) stderr = (stderr + new TextDecoder().decode(c)).slice(-200_000);
    })();
    const reader = (p.stdout as ReadableStream<Uint8Array>).getReader();
    let out = "";
    const deadline = Date.now() + 60_000;
    // Istio's logger also writes to stdout: the ready line is the one carrying the ports.
    const readyLine = () => out.split("\n").find((l) => l.startsWith('{"caPort"') || l.startsWith('{"xdsPort"'));
    while (!readyLine()) {
      const r = await Promise.race([reader.read(), Bun.sleep(Math.max(0, deadline - Date.now())).then(() => "timeout" as const)]);
      if (r === "timeout" || r.done) {
        p.kill("SIGKILL");
        throw new Error(`istiod-lite did not report its ports (exit ${p.exitCode}); stderr tail:\n${stderr.slice(-3000)}`);
      }
      out += new TextDecoder().decode(r.value);
    }
    reader.releaseLock();
    stdout = "";
    void (async () => {
      for await (const c of p.stdout as ReadableStream<Uint8Array>) stdout = (stdout + new TextDecoder().decode(c)).slice(-200_000);
    })();
    return JSON.parse(readyLine()!) as Ready;
  };

  let ready = await launch();
  const stopProc = async (): Promise<void> => {
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill("SIGTERM");
    const t = setTimeout(() => proc?.kill("SIGKILL"), 5000);
    await proc.exited;
    clearTimeout(t);
  };
  return {
    get xdsAddress() {
      return `127.0.0.1:${ready.xdsPort}`;
    },
    get caAddress() {
      return `127.0.0.1:${ready.caPort}`;
    },
    rootCertPath: ready.rootCert,
    rootPem: readFileSync(ready.rootCert, "utf8"),
    records: () =>
      existsSync(ready.requests)
        ? readFileSync(ready.requests, "utf8")
            .split("\n")
            .filter(Boolean)
            .map((l) => JSON.parse(l) as LiteRecord)
        : [],
    setConfig: (y) => writeFileSync(join(configDir, "config.yaml"), y),
    async restart() {
      await stopProc();
      ready = await launch(ready);
    },
    down: stopProc,
    async up() {
      ready = await launch(ready);
    },
    async reloadMeshCaCertificates(pem) {
      if (opts.meshCaCertificates === undefined) throw new Error("istiod-lite was started without meshCaCertificates");
      writeFileSync(caCertsFile, pem);
      const before = stdout.split('{"reloaded"').length;
      proc?.kill("SIGHUP");
      const deadline = Date.now() + 20_000;
      while (stdout.split('{"reloaded"').length === before) {
        if (Date.now() > deadline) throw new Error(`istiod-lite did not report the reload; stderr tail:\n${stderr.slice(-3000)}`);
        await Bun.sleep(50);
      }
      const line = stdout
        .split("\n")
        .filter((l) => l.startsWith('{"reloaded"'))
        .pop()!;
      if (!line.startsWith('{"reloaded":true')) throw new Error(`istiod-lite could not reload the trust anchors: ${line}`);
    },
    log: () => stderr,
    pid: () => proc?.pid ?? 0,
    async stop() {
      await stopProc();
      rmSync(work, { recursive: true, force: true });
    },
  };
}
