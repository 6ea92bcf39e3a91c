// One agent (ours or Istio's pilot-agent) running as a sidecar would, for the certificate issue
// suites: a fresh directory as its working directory with istiod-lite's root and token at the
// injector's paths, Istio's bootstrap template, and the recording Envoy stand-in (which does not
// ask for secrets: tests that need an SDS client use sds-watch.ts). Runs until stopped.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { freePort } from "../../e2e/pod.ts";
import { istioBootstrapTemplate } from "./agent-run.ts";
import { killStandins, writeStandinLauncher } from "./envoy-standin.ts";
import { LITE_NAMESPACE, LITE_SERVICE_ACCOUNT, LITE_TOKEN, type IstiodLite } from "./istiod-lite.ts";

export const TOKEN_FILE = "var/run/secrets/tokens/istio-token";
export const ROOT_FILE = "var/run/secrets/istio/root-cert.pem";
export const SDS_SOCKET = "var/run/secrets/workload-spiffe-uds/socket";

export interface CertPod {
  dir: string;
  path(rel: string): string;
  proc: ReturnType<typeof Bun.spawn>;
  log(): string;
  stop(): Promise<void>;
}

export interface CertPodOptions {
  env?: Record<string, string>;
  /** Files placed before start (relative path -> content); the token and root are added unless given as null. */
  files?: Record<string, string | null>;
  /** Extra ProxyConfig fields. */
  proxyConfig?: Record<string, unknown>;
}

export async function startCertPod(bin: string, lite: IstiodLite, o: CertPodOptions = {}): Promise<CertPod> {
  const dir = mkdtempSync(join(tmpdir(), "agent-certs-"));
  const files: Record<string, string | null> = { [TOKEN_FILE]: LITE_TOKEN, [ROOT_FILE]: lite.rootPem, ...o.files };
  for (const [rel, text] of Object.entries(files)) {
    if (text === null) continue;
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  mkdirSync(join(dir, "var/lib/istio/envoy"), { recursive: true });
  writeFileSync(join(dir, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"), readFileSync(istioBootstrapTemplate()));
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    POD_NAME: "certs-0",
    POD_NAMESPACE: LITE_NAMESPACE,
    SERVICE_ACCOUNT: LITE_SERVICE_ACCOUNT,
    INSTANCE_IP: "127.0.0.1",
    CLOUD_PLATFORM: "none",
    CA_ADDR: lite.caAddress,
    ISTIOD_SAN: "istiod.istio-system.svc",
    INTEROP_ENVOY_RECORD: join(dir, "standin.jsonl"),
    PROXY_CONFIG: JSON.stringify({
      discoveryAddress: lite.xdsAddress,
      binaryPath: writeStandinLauncher(dir),
      statusPort: await freePort(),
      proxyAdminPort: await freePort(),
      drainDuration: "1s",
      terminationDrainDuration: "1s",
      ...o.proxyConfig,
    }),
    ...o.env,
  };
  const proc = Bun.spawn([bin, "proxy", "sidecar"], { cwd: dir, env, stdout: "pipe", stderr: "pipe" });
  let text = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const dec = new TextDecoder();
    for await (const c of s) text = (text + dec.decode(c)).slice(-400_000);
  };
  void pump(proc.stdout as ReadableStream<Uint8Array>);
  void pump(proc.stderr as ReadableStream<Uint8Array>);
  return {
    dir,
    path: (rel) => join(dir, rel),
    proc,
    log: () => text,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await proc.exited;
      killStandins(join(dir, "standin.jsonl"));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
