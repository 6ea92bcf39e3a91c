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
  /** Lines it wrote on stderr, for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

interface Ready {
  xdsPort: number;
  caPort: number;
  rootCert: string;
  requests: string;
}

export async function startIstiodLite(yaml = ""): Promise<IstiodLite> {
  const work = mkdtempSync(join(tmpdir(), "istiod-lite-"));
  const configDir = join(work, "config");
  const stateDir = join(work, "state");
  mkdirSync(configDir);
  writeFileSync(join(configDir, "config.yaml"), yaml);
  let stderr = "";
  let proc: ReturnType<typeof Bun.spawn> | undefined;

  const launch = async (ports?: Ready): Promise<Ready> => {
    const args = [ISTIOD_LITE, "--config", configDir, "--state", stateDir];
    if (ports) args.push("--xds-port", String(ports.xdsPort), "--ca-port", String(ports.caPort));
    const p = Bun.spawn(args, { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: work } });
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
    void (async () => {
      for await (const _ of p.stdout as ReadableStream<Uint8Array>) void _;
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
        ? readFileSync(ready.requests, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as LiteRecord)
        : [],
    setConfig: (y) => writeFileSync(join(configDir, "config.yaml"), y),
    async restart() {
      await stopProc();
      ready = await launch(ready);
    },
    log: () => stderr,
    async stop() {
      await stopProc();
      rmSync(work, { recursive: true, force: true });
    },
  };
}
