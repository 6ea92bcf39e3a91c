// Differential: the status port of our agent and of Istio's pilot-agent over a matrix of states
// (Envoy ready or not, application probes up, down or unknown, after /drain, a name table from
// istiod's NDS or none, proxyless without istiod), each agent started
// one after the other in a fresh directory with identical env and ports, with the interop
// stand-in as Envoy (admin API only; INTEROP_ENVOY_READY says whether its stats report config).

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { freePort } from "../e2e/pod.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { startIstiodLite, LITE_TOKEN, type IstiodLite } from "./support/istiod-lite.ts";
import { istioBootstrapTemplate } from "./support/agent-run.ts";
import { killStandins, writeStandinLauncher } from "./support/envoy-standin.ts";

interface State {
  name: string;
  envoyReady: boolean;
  /** Requests made in order; the codes of all are compared. */
  requests: { method: "GET" | "POST"; path: string }[];
  /** More environment for both agents ({dns} is replaced by a free port). */
  env?: Record<string, string>;
  /** Proxyless (DISABLE_ENVOY=true): no Envoy, so no admin port to wait for. */
  proxyless?: boolean;
  /** Before the requests, wait (bounded) until this path answers 200: the sentinel of the state. */
  settle?: string;
  /** istiod unreachable: the agent never receives xDS (no name table ever). */
  noIstiod?: boolean;
}

const READY = { method: "GET" as const, path: "/healthz/ready" };
const NDSZ = { method: "GET" as const, path: "/debug/ndsz" };
/** DNS capture with the DNS proxy on a free port; the stand-in Envoy opens the xDS stream that brings NDS. */
const DNS = { ISTIO_META_DNS_CAPTURE: "true", DNS_PROXY_ADDR: "127.0.0.1:{dns}", INTEROP_ENVOY_XDS: "sotw" };
const STATES: State[] = [
  { name: "Envoy has no config", envoyReady: false, requests: [READY] },
  { name: "Envoy ready", envoyReady: true, requests: [READY] },
  { name: "app probe up", envoyReady: true, requests: [{ method: "GET", path: "/app-health/app/readyz" }] },
  { name: "app probe down", envoyReady: true, requests: [{ method: "GET", path: "/app-health/broken/readyz" }] },
  { name: "unknown app probe", envoyReady: true, requests: [{ method: "GET", path: "/app-health/none/livez" }] },
  { name: "unknown path", envoyReady: true, requests: [{ method: "GET", path: "/no-such-endpoint" }] },
  { name: "draining", envoyReady: true, requests: [READY, { method: "POST", path: "/drain" }, READY] },
  // The name table: /debug/ndsz is 404 without one, 200 once istiod's NDS has arrived; readiness
  // does not wait for it (Istio gates neither a sidecar nor a proxyless pod on DNS).
  { name: "no name table (DNS capture off)", envoyReady: true, requests: [NDSZ, READY] },
  { name: "name table from istiod (DNS capture on)", envoyReady: true, env: DNS, settle: "/debug/ndsz", requests: [NDSZ, READY] },
  { name: "proxyless, name table never arrives (istiod unreachable)", envoyReady: false, proxyless: true, noIstiod: true, env: DNS, requests: [READY, NDSZ] },
];

describeRequiring({ check: interopUnmet }, "status differential: ours vs Istio's pilot-agent over a matrix of states", () => {
  let lite: IstiodLite;
  let app: ReturnType<typeof Bun.serve>;
  beforeAll(async () => {
    lite = await startIstiodLite("");
    app = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: (req) => new Response("x", { status: new URL(req.url).pathname === "/ok" ? 200 : 503 }) });
  }, 90_000);
  afterAll(async () => {
    app?.stop(true);
    await lite?.stop();
  });

  async function codes(bin: string, st: State, ports: { status: number; admin: number; dns: number; dead: number }): Promise<number[]> {
    const dir = mkdtempSync(join(tmpdir(), "agent-status-diff-"));
    const files: Record<string, string> = { "var/run/secrets/tokens/istio-token": LITE_TOKEN, "var/run/secrets/istio/root-cert.pem": lite.rootPem };
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(join(dir, rel, ".."), { recursive: true });
      writeFileSync(join(dir, rel), text);
    }
    mkdirSync(join(dir, "var/lib/istio/envoy"), { recursive: true });
    writeFileSync(join(dir, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"), await Bun.file(istioBootstrapTemplate()).text());
    const probers = {
      "/app-health/app/readyz": { httpGet: { path: "/ok", port: app.port, scheme: "HTTP" }, timeoutSeconds: 1 },
      "/app-health/broken/readyz": { httpGet: { path: "/fail", port: app.port, scheme: "HTTP" }, timeoutSeconds: 1 },
    };
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: dir,
      POD_NAME: "status-0",
      POD_NAMESPACE: "fake-namespace",
      SERVICE_ACCOUNT: "fake-sa",
      INSTANCE_IP: "127.0.0.1",
      CLOUD_PLATFORM: "none",
      CA_ADDR: lite.caAddress,
      ISTIO_KUBE_APP_PROBERS: JSON.stringify(probers),
      INTEROP_ENVOY_READY: st.envoyReady ? "1" : "0",
      INTEROP_ENVOY_RECORD: join(dir, "standin.jsonl"),
      PROXY_CONFIG: JSON.stringify({
        discoveryAddress: st.noIstiod ? `127.0.0.1:${ports.dead}` : lite.xdsAddress,
        binaryPath: writeStandinLauncher(dir),
        statusPort: ports.status,
        proxyAdminPort: ports.admin,
        drainDuration: "1s",
        terminationDrainDuration: "1s",
      }),
      ...Object.fromEntries(Object.entries(st.env ?? {}).map(([k, v]) => [k, v.replace("{dns}", String(ports.dns))])),
      ...(st.proxyless ? { DISABLE_ENVOY: "true" } : {}),
    };
    const p = Bun.spawn([bin, "proxy", "sidecar"], { cwd: dir, env, stdout: "ignore", stderr: "ignore" });
    try {
      // Sentinel: the stand-in's admin answers (Envoy is up) and the status port answers.
      const deadline = Date.now() + 20_000;
      const get = (port: number, path: string, method = "GET") => fetch(`http://127.0.0.1:${port}${path}`, { method, signal: AbortSignal.timeout(3000) });
      for (;;) {
        try {
          if (!st.proxyless) await get(ports.admin, "/ready");
          await get(ports.status, "/healthz/ready");
          break;
        } catch {
          if (Date.now() > deadline || p.exitCode !== null) throw new Error(`${bin}: status port or Envoy admin not up for "${st.name}" (exit ${p.exitCode})`);
          await Bun.sleep(100);
        }
      }
      if (st.envoyReady) {
        // Both agents may need a probe round before they call Envoy ready: wait for it.
        while ((await get(ports.status, "/healthz/ready")).status !== 200 && Date.now() < deadline) await Bun.sleep(200);
      }
      if (st.settle) {
        while ((await get(ports.status, st.settle)).status !== 200 && Date.now() < deadline) await Bun.sleep(200);
      }
      const out: number[] = [];
      for (const r of st.requests) out.push((await get(ports.status, r.path, r.method)).status);
      return out;
    } finally {
      p.kill("SIGKILL");
      await p.exited;
      killStandins(join(dir, "standin.jsonl"));
      rmSync(dir, { recursive: true, force: true });
    }
  }

  for (const st of STATES) {
    test(`${st.name}: the same status codes`, async () => {
      requireBinary();
      const ports = { status: await freePort(), admin: await freePort(), dns: await freePort(), dead: await freePort() };
      const theirs = await codes(PILOT_AGENT, st, ports);
      const ours = await codes(DIST_AGENT, st, ports);
      expect({ state: st.name, codes: ours }).toEqual({ state: st.name, codes: theirs });
    }, 60_000);
  }
});
