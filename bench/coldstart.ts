// Cold start of the compiled agent (issue #10), beside a compiled hello-world, alternating runs in
// one process so machine noise spreads over all of them:
//   istiod mode     `agent proxy sidecar` with the default config (no istiod reachable) and a
//                   stand-in Envoy: spawn -> "Agent started" (sockets listening, bootstraps
//                   written, Envoy spawned). The target: <= 30 ms.
//   local, Envoy    LOCAL_XDS_PATH + CA_PROVIDER=local, Envoy = bench/coldstart-envoy.ts compiled
//                   (admin API + a real ADS client for CDS/LDS through the agent's XDS socket):
//                   "Agent started", then GET /healthz/ready = 200 (every blocker cleared:
//                   certificate warmed, file loaded, xDS connected, Envoy LIVE with CDS+LDS).
//   local, proxyless DISABLE_ENVOY=true (the grpc-agent / demo shape) and a @grpc/grpc-js-xds
//                   client resolving xds:///greeter.demo:50051 through the agent's socket with the
//                   gRPC bootstrap it wrote: "Agent started", the first successful call to
//                   examples/greeter.ts's server, and ready.
// Ready is polled every 5 ms (the number is up to 5 ms late); the agent is SIGKILLed after each run.
// The pod has a mounted root CA (as a real pod has). CLOUD_PLATFORM is left unset (Istio's default:
// probe GCP, AWS and Azure); COLDSTART_CLOUD_PLATFORM=none measures without the probe.

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import YAML from "yaml";
import * as grpcXds from "@grpc/grpc-js-xds";
import { greeterClient, startGreeter } from "../examples/greeter.ts";
import { freePort } from "../test/support/fake-envoy.ts";
import { fmt, summary } from "./support.ts";

const RUNS = 15;
const POLL_MS = 5;
const SETTLE_MS = 150;
const TARGET = "xds:///greeter.demo:50051";
const ROOT = resolve(import.meta.dir, "..");

type Proc = ReturnType<typeof Bun.spawn>;

/** Spawn and resolve once stdout matches `marker` (ms since spawn); stdout keeps draining. */
async function spawnUntil(cmd: string[], env: Record<string, string>, cwd: string, marker: RegExp): Promise<{ t0: number; ms: number; proc: Proc }> {
  const t0 = performance.now();
  const proc = Bun.spawn(cmd, { env, cwd, stdout: "pipe", stderr: "ignore" });
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${cmd[0]} exited before printing ${marker}: ${buf.slice(-2000)}`);
    buf += dec.decode(value);
    if (marker.test(buf)) break;
  }
  const ms = performance.now() - t0;
  void (async () => {
    for (;;) if ((await reader.read()).done) break;
  })();
  return { t0, ms, proc };
}

async function stop(proc: Proc): Promise<void> {
  proc.kill("SIGKILL");
  await proc.exited;
  // Untimed: let the run's leftovers (the stand-in Envoy leaves within 50 ms) go before the next.
  await Bun.sleep(SETTLE_MS);
}

/** Poll until `probe` is true; ms since t0, or NaN after `limitMs`. */
async function until(t0: number, probe: () => Promise<boolean>, limitMs = 15_000): Promise<number> {
  for (;;) {
    if (await probe().catch(() => false)) return performance.now() - t0;
    if (performance.now() - t0 > limitMs) return NaN;
    await Bun.sleep(POLL_MS);
  }
}

const isReady = (port: number) => async () => (await fetch(`http://127.0.0.1:${port}/healthz/ready`, { signal: AbortSignal.timeout(1000) })).status === 200;

function compile(entry: string, out: string): void {
  const b = Bun.spawnSync([process.execPath, "build", entry, "--compile", "--minify", "--bytecode", "--outfile", out], { stderr: "pipe" });
  if (b.exitCode !== 0) throw new Error(`compiling ${entry}: ${b.stderr.toString()}`);
}

const SYSTEM_ROOTS = "/etc/ssl/certs/ca-certificates.crt";

function podEnv(dir: string, statusPort: number, adminPort: number, envoy: string, extra: Record<string, string>): Record<string, string> {
  // A pod has the mesh root CA mounted (configmap istio-ca-root-cert); without it the agent
  // refuses to start in istiod mode, as Istio's does. Any PEM bundle stands in: nothing dials.
  mkdirSync(join(dir, "var/run/secrets/istio"), { recursive: true });
  copyFileSync(SYSTEM_ROOTS, join(dir, "var/run/secrets/istio/root-cert.pem"));
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    POD_NAME: "greeter-client-0",
    POD_NAMESPACE: "demo",
    SERVICE_ACCOUNT: "greeter-client",
    INSTANCE_IP: "127.0.0.1",
    ISTIO_META_CLUSTER_ID: "Kubernetes",
    ...(process.env.COLDSTART_CLOUD_PLATFORM ? { CLOUD_PLATFORM: process.env.COLDSTART_CLOUD_PLATFORM } : {}),
    PROXY_CONFIG: JSON.stringify({
      binaryPath: envoy,
      statusPort,
      proxyAdminPort: adminPort,
      terminationDrainDuration: "1s",
      ...(extra.LOCAL_XDS_PATH ? { controlPlaneAuthPolicy: "NONE" } : {}),
    }),
    ...extra,
  };
}

export async function run(): Promise<string> {
  // COLDSTART_AGENT=<path> measures another build (e.g. before/after a change).
  const agent = process.env.COLDSTART_AGENT ?? join(ROOT, "dist/agent");
  if (!existsSync(agent)) return "## Cold start\n\nskipped: dist/agent not built\n";
  const dir = mkdtempSync(join(tmpdir(), "agent-coldstart-"));
  const greeter = await startGreeter("bench");
  grpcXds.register();
  let xdsYaml = "";
  try {
    writeFileSync(join(dir, "hello.ts"), 'console.log("ready"); setInterval(() => {}, 1000);\n');
    const hello = join(dir, "hello");
    compile(join(dir, "hello.ts"), hello);
    const standIn = join(dir, "envoy-standin");
    compile(join(import.meta.dir, "coldstart-envoy.ts"), standIn);
    const sleeper = join(dir, "envoy-sleep");
    writeFileSync(sleeper, "#!/bin/sh\nexec sleep 8\n", { mode: 0o755 });
    const doc = YAML.parse(readFileSync(join(ROOT, "examples/xds.yaml"), "utf8"));
    doc.endpoints[0].endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = greeter.port;
    xdsYaml = YAML.stringify(doc);

    // Warm this process's grpc-js-xds and the page cache, so run 1 measures the agent, not us.
    await localRun("warm-up", true);

    const s: Record<string, number[]> = {};
    const add = (k: string, v: number) => (s[k] ??= []).push(v);
    for (let i = 0; i < RUNS; i++) {
      const ist = await istiodRun(i);
      add("istiod: Envoy spawned, sockets listening", ist);
      add("hello", await helloRun());
      const env = await localRun(`e${i}`, false);
      add("local + Envoy: Envoy spawned, sockets listening", env.started);
      add("local + Envoy: ready (/healthz/ready 200)", env.ready);
      add("hello", await helloRun());
      const pl = await localRun(`p${i}`, true);
      add("local proxyless: sockets listening, gRPC bootstrap written", pl.started);
      add("local proxyless: first successful gRPC call", pl.call);
      add("local proxyless: ready (/healthz/ready 200)", pl.ready);
      add("hello", await helloRun());
    }

    const h = summary(s.hello!);
    const rows = Object.entries(s)
      .filter(([k]) => k !== "hello")
      .map(([k, v]) => {
        const a = summary(v.filter((x) => !Number.isNaN(x)));
        const failed = v.filter((x) => Number.isNaN(x)).length;
        return `| ${k}${failed ? ` (${failed} runs timed out)` : ""} | ${fmt(a.median)} | ${fmt(a.p99)} | ${fmt(a.median / h.median, 1)}× | ${fmt(a.p99 / h.p99, 1)}× |`;
      });
    return [
      "## Cold start (compiled binary, local mode)",
      "",
      `Spawn of \`agent proxy sidecar\` until: "Agent started" (status, SDS and XDS sockets listening, both bootstraps written, Envoy spawned; target ≤ 30 ms), \`/healthz/ready\` answering 200 (polled every ${POLL_MS} ms), and a proxyless gRPC client's first successful call through the agent (local mode: LOCAL_XDS_PATH=examples/xds.yaml, CA_PROVIDER=local). Beside a compiled hello-world until it prints (median ${fmt(h.median)} ms, p99 ${fmt(h.p99)} ms); ${RUNS} alternating runs each.`,
      "",
      "| spawn → | median (ms) | p99 (ms) | median / hello | p99 / hello |",
      "|---|---|---|---|---|",
      ...rows,
      "",
    ].join("\n");
  } finally {
    greeter.stop();
    rmSync(dir, { recursive: true, force: true });
  }

  async function helloRun(): Promise<number> {
    const r = await spawnUntil([join(dir, "hello")], { PATH: process.env.PATH ?? "" }, dir, /ready/);
    await stop(r.proc);
    return r.ms;
  }

  async function istiodRun(i: number): Promise<number> {
    const root = join(dir, `istiod-${i}`);
    Bun.spawnSync(["mkdir", "-p", root]);
    const env = podEnv(root, await freePort(), await freePort(), join(dir, "envoy-sleep"), {});
    const r = await spawnUntil([agent, "proxy", "sidecar"], env, root, /Agent started/);
    await stop(r.proc);
    return r.ms;
  }

  async function localRun(name: string, proxyless: boolean): Promise<{ started: number; ready: number; call: number }> {
    const root = join(dir, name);
    Bun.spawnSync(["mkdir", "-p", root]);
    writeFileSync(join(root, "xds.yaml"), xdsYaml);
    const statusPort = await freePort();
    const extra: Record<string, string> = {
      LOCAL_XDS_PATH: "xds.yaml",
      CA_PROVIDER: "local",
      ...(proxyless ? { DISABLE_ENVOY: "true", OUTPUT_CERTS: "etc/certs" } : {}),
    };
    const env = podEnv(root, statusPort, await freePort(), join(dir, "envoy-standin"), extra);
    const r = await spawnUntil([agent, "proxy", "sidecar"], env, root, /Agent started/);
    try {
      const ready = until(r.t0, isReady(statusPort));
      let call = NaN;
      if (proxyless) {
        // The gRPC bootstrap is written before "Agent started"; its socket path is relative to the agent's root.
        const bootstrap = JSON.parse(readFileSync(join(root, "etc/istio/proxy/grpc-bootstrap.json"), "utf8"));
        bootstrap.xds_servers[0].server_uri = `unix://${resolve(root, bootstrap.xds_servers[0].server_uri.replace(/^unix:\/\//, ""))}`;
        const client = greeterClient(TARGET, { "grpc.TEST_ONLY_DO_NOT_USE_IN_PROD.xds_bootstrap_config": JSON.stringify(bootstrap) });
        try {
          const answer = await client.sayHello("bench", 15_000);
          if (answer === "hello bench from bench") call = performance.now() - r.t0;
        } catch {
          // counted as timed out (NaN)
        } finally {
          client.close();
        }
      }
      return { started: r.ms, ready: await ready, call };
    } finally {
      await stop(r.proc);
    }
  }
}

if (import.meta.main) console.log(await run());
