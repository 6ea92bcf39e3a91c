// Shared by the e2e tests: the compiled agent started as a pod would start it — a temp root as
// its working directory holding its own copy of dist/agent, the env Istio's injector sets, and
// bounded polling helpers whose failures say what did not happen plus the agent's last log lines.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import YAML from "yaml";
import { sandbox, start, type Running, type Sandbox } from "../support/binary.ts";
import { freePort, readRecords } from "../support/fake-envoy.ts";
import { loadX509 } from "../support/x509.ts";
import type { E2eEnvoyRecord } from "./xds-envoy.ts";

export { freePort };

const EXAMPLE_XDS = resolve(import.meta.dir, "../../examples/xds.yaml");

export interface Pod {
  box: Sandbox;
  agent: Running;
  statusPort: number;
  adminPort: number;
  path(rel: string): string;
  /** Last log lines for failure messages. */
  tail(n?: number): string;
  exitCode(): number | null;
  waitExit(ms?: number): Promise<number | null>;
  kill(): void;
}

export interface PodOptions {
  env?: Record<string, string>;
  proxyConfig?: Record<string, unknown>;
  /** Files to write (relative to the root) before the agent starts. */
  files?: Record<string, string>;
  /** The agent's arguments (default: proxy sidecar). */
  args?: string[];
  /** A command the agent is started through, e.g. `unshare -m sh -c '…; exec "$@"' sh`. */
  prefix?: string[];
}

/** Injector-like env for pod `greeter-client-0` in namespace `demo`, service account `greeter-client`. */
export async function startPod(opts: PodOptions = {}): Promise<Pod> {
  const box = sandbox("agent-e2e-");
  const statusPort = await freePort();
  const adminPort = await freePort();
  for (const [rel, text] of Object.entries(opts.files ?? {})) {
    mkdirSync(dirname(join(box.dir, rel)), { recursive: true });
    writeFileSync(join(box.dir, rel), text);
  }
  const proxyConfig = { statusPort, proxyAdminPort: adminPort, ...opts.proxyConfig };
  const env: Record<string, string> = {
    HOME: box.dir,
    POD_NAME: "greeter-client-0",
    POD_NAMESPACE: "demo",
    SERVICE_ACCOUNT: "greeter-client",
    INSTANCE_IP: "127.0.0.1",
    ISTIO_META_CLUSTER_ID: "Kubernetes",
    PROXY_CONFIG: JSON.stringify(proxyConfig),
    ...opts.env,
  };
  const argv = [...(opts.prefix ?? []), box.bin, ...(opts.args ?? ["proxy", "sidecar"])];
  const agent = start(argv[0]!, argv.slice(1), { cwd: box.dir, env });
  return {
    box,
    agent,
    statusPort,
    adminPort,
    path: (rel) => join(box.dir, rel),
    tail: (n = 25) => agent.output().split("\n").slice(-n).join("\n"),
    exitCode: () => agent.proc.exitCode,
    async waitExit(ms = 15_000) {
      const t = Bun.sleep(ms).then(() => "timeout" as const);
      const r = await Promise.race([agent.proc.exited, t]);
      return r === "timeout" ? null : r;
    },
    kill() {
      if (agent.proc.exitCode === null && agent.proc.signalCode === null) agent.proc.kill("SIGKILL");
    },
  };
}

/** Poll `probe` until it returns a value; fails naming `what` with the agent's recent log. */
export async function until<T>(pod: Pod | undefined, what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  let lastErr = "";
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      lastErr = (e as Error).message;
    }
    if (pod && pod.exitCode() !== null) break;
    await Bun.sleep(100);
  }
  throw new Error(
    `${what}: not within ${ms}ms${lastErr ? ` (last error: ${lastErr})` : ""}${pod ? `; agent exit=${pod.exitCode()}; agent log tail:\n${pod.tail()}` : ""}`,
  );
}

export async function httpGet(url: string): Promise<{ status: number; body: string }> {
  const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
  return { status: r.status, body: await r.text() };
}

export function fileIfExists(p: string): string | undefined {
  return existsSync(p) ? readFileSync(p, "utf8") : undefined;
}

/** examples/xds.yaml routing xds:///greeter.demo:50051 to 127.0.0.1:`port`. */
export function xdsYamlWithPort(port: number): string {
  const doc = YAML.parse(readFileSync(EXAMPLE_XDS, "utf8"));
  doc.endpoints[0].endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = port;
  return YAML.stringify(doc);
}

/** SPIFFE URI SANs of the first certificate in `pem`. */
export async function spiffeIds(pem: string): Promise<string[]> {
  const x509 = await loadX509();
  const cert = new x509.X509Certificate(pem);
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  return (san?.names.items ?? []).filter((n) => n.type === "url").map((n) => n.value);
}

export async function certSerial(pem: string): Promise<string> {
  const x509 = await loadX509();
  return new x509.X509Certificate(pem).serialNumber;
}

/** A grpc-js-xds greeter client for `target` using the gRPC bootstrap the agent wrote (socket path made absolute). */
export async function xdsGreeterClient(pod: Pod, target: string) {
  const { greeterClient } = await import("../../examples/greeter.ts");
  const text = await until(pod, "gRPC bootstrap written", () => fileIfExists(pod.path("etc/istio/proxy/grpc-bootstrap.json")));
  const bootstrap = JSON.parse(text);
  const uri: string = bootstrap.xds_servers[0].server_uri;
  if (!uri.startsWith("unix://")) throw new Error(`gRPC bootstrap server_uri ${uri} is not a unix socket`);
  const sock = uri.replace(/^unix:\/\//, "");
  const abs = sock.startsWith("/") ? sock : join(pod.box.dir, sock);
  await until(pod, `XDS socket ${abs}`, () => (existsSync(abs) ? true : undefined));
  bootstrap.xds_servers[0].server_uri = `unix://${abs}`;
  return greeterClient(target, { "grpc.TEST_ONLY_DO_NOT_USE_IN_PROD.xds_bootstrap_config": JSON.stringify(bootstrap) });
}

/** The Envoy stand-in's records (FAKE_ENVOY_RECORD). */
export function envoyRecords(file: string): E2eEnvoyRecord[] {
  return readRecords(file) as E2eEnvoyRecord[];
}

/** An Envoy stand-in left behind by a killed agent: stop it by its recorded pid. */
export function killRecordedEnvoys(file: string): void {
  for (const r of envoyRecords(file)) {
    if (r.event !== "start") continue;
    try {
      process.kill(r.pid, "SIGKILL");
    } catch {}
  }
}
