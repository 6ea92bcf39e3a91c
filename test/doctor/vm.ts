// A VM as Istio's docs set one up, in a temp directory: cluster.env, mesh config, root cert, token,
// an Envoy stand-in, and a loopback TLS "istiod" (openssl-made certificate for
// istiod.istio-system.svc and 127.0.0.1). `agent doctor` (dist/agent) runs there with the
// environment istio-start.sh starts from; each test breaks one thing.

import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer as createTlsServer, type Server } from "node:tls";
import { dirname, join } from "node:path";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";
import { jwt, makeCa, makeServerCert, type KeyPair } from "./pki.ts";

export const CLUSTER_ENV = [
  "CANONICAL_SERVICE='vm-app'",
  "ISTIO_INBOUND_PORTS='*'",
  "ISTIO_LOCAL_EXCLUDE_PORTS='15090,15021,15020'",
  "ISTIO_META_CLUSTER_ID='Kubernetes'",
  "ISTIO_META_DNS_CAPTURE='false'",
  "ISTIO_NAMESPACE='vm-ns'",
  "ISTIO_SERVICE_CIDR='*'",
  "POD_NAMESPACE='vm-ns'",
  "SERVICE_ACCOUNT='vm-sa'",
  "TRUST_DOMAIN='cluster.local'",
].join("\n");

/** A token the CA would take: audience istio-ca, expiring in 2096. */
export const GOOD_TOKEN = jwt({ aud: ["istio-ca"], exp: 4_000_000_000, sub: "system:serviceaccount:vm-ns:vm-sa" });

export interface Vm {
  box: Sandbox;
  ca: KeyPair;
  istiodPort: number;
  /** Environment for `agent doctor` (what istio-start.sh inherits plus its file locations). */
  env: Record<string, string>;
  write(rel: string, text: string, mode?: number): void;
  path(rel: string): string;
  doctor(args?: string[], env?: Record<string, string>, prefix?: string[]): Promise<{ code: number | null; out: string }>;
  close(): void;
}

export interface VmOptions {
  /** DNS SANs of istiod's certificate. */
  sans?: string[];
  /** Serve TLS (default) or accept TCP and never answer. */
  silent?: boolean;
}

export async function startVm(opts: VmOptions = {}): Promise<Vm> {
  const box = sandbox("agent-doctor-");
  const ca = makeCa();
  const server = makeServerCert(ca, opts.sans ?? ["istiod.istio-system.svc"]);
  let srv: Server | import("node:net").Server;
  if (opts.silent) {
    const { createServer } = await import("node:net");
    srv = createServer(() => {});
  } else {
    srv = createTlsServer({ cert: server.cert, key: server.key }, (s) => s.end());
    srv.on("tlsClientError", () => {});
  }
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  const istiodPort = (srv.address() as { port: number }).port;
  const write = (rel: string, text: string, mode?: number) => {
    const p = join(box.dir, rel);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, text);
    if (mode !== undefined) chmodSync(p, mode);
  };
  const statusPort = await freePort();
  write("var/lib/istio/envoy/cluster.env", CLUSTER_ENV + "\n");
  write("etc/certs/root-cert.pem", ca.cert);
  write("var/run/secrets/tokens/istio-token", GOOD_TOKEN);
  write("usr/local/bin/envoy", "#!/bin/sh\nexit 0\n", 0o755);
  write(
    "etc/istio/config/mesh",
    `defaultConfig:\n  binaryPath: ${join(box.dir, "usr/local/bin/envoy")}\n  statusPort: ${statusPort}\n  interceptionMode: NONE\n`,
  );
  const env: Record<string, string> = {
    ISTIO_CLUSTER_CONFIG: join(box.dir, "var/lib/istio/envoy/cluster.env"),
    ISTIO_SIDECAR_CONFIG: join(box.dir, "var/lib/istio/envoy/sidecar.env"),
    PROV_CERT: join(box.dir, "etc/certs"),
    OUTPUT_CERTS: join(box.dir, "etc/certs"),
    PILOT_ADDRESS: `127.0.0.1:${istiodPort}`,
    ISTIOD_SAN: "istiod.istio-system.svc",
    DISABLE_ENVOY: "true",
    ISTIO_CPU_LIMIT: "64",
  };
  return {
    box,
    ca,
    istiodPort,
    env,
    write,
    path: (rel) => join(box.dir, rel),
    async doctor(args = [], extra = {}, prefix = []) {
      const argv = [...prefix, box.bin, "doctor", "--timeoutMillis", "2000", "--hostsFile", join(box.dir, "etc/hosts"), ...args];
      const run = start(argv[0]!, argv.slice(1), { cwd: box.dir, env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", ...env, ...extra } });
      const code = await run.proc.exited;
      return { code, out: run.output() };
    },
    close() {
      srv.close();
      box.cleanup();
    },
  };
}

/** The report line of `check` with `status` (ok, warn, FAIL, skip) whose text contains `text`. */
export function line(out: string, status: string, check: string, text: string): string | undefined {
  return out.split("\n").find((l) => l.startsWith(status.padEnd(4) + "  " + check + " ") && l.includes(text));
}
