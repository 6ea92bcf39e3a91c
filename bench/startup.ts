// Foundation benchmark: compiled `agent proxy` start -> composition root built ("Agent started"
// log line), and idle RSS after 3 s, beside a compiled hello-world that prints a line and idles,
// measured in the same run and reported as ratios.

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fmt, rssKiB, summary } from "./support.ts";

const RUNS = 15;

async function startToLine(
  cmd: string[],
  env: Record<string, string>,
  cwd: string,
  marker: RegExp,
): Promise<{ ms: number; proc: ReturnType<typeof Bun.spawn> }> {
  const t0 = performance.now();
  const proc = Bun.spawn(cmd, { env, cwd, stdout: "pipe", stderr: "inherit" });
  const reader = proc.stdout.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${cmd[0]} exited before printing ${marker}: ${buf}`);
    buf += dec.decode(value);
    if (marker.test(buf)) break;
  }
  const ms = performance.now() - t0;
  void (async () => {
    for (;;) if ((await reader.read()).done) break;
  })();
  return { ms, proc };
}

export async function run(): Promise<string> {
  const agent = process.env.STARTUP_AGENT ?? "dist/agent";
  if (!existsSync(agent)) return "## Startup\n\nskipped: dist/agent not built\n";
  const dir = mkdtempSync(join(tmpdir(), "agent-bench-"));
  const hello = join(dir, "hello.ts");
  writeFileSync(hello, 'console.log("ready"); setInterval(() => {}, 1000);\n');
  const helloBin = join(dir, "hello");
  const b = Bun.spawnSync([process.execPath, "build", hello, "--compile", "--minify", "--bytecode", "--outfile", helloBin]);
  if (b.exitCode !== 0) throw new Error(b.stderr.toString());

  // A stand-in Envoy that just stays up: "Agent started" is logged once it has been spawned, after
  // every socket (status, SDS, XDS) is listening and the bootstrap is written.
  const envoy = join(dir, "envoy");
  // It exits by itself soon after, so the SIGKILLed agents leave nothing behind.
  writeFileSync(envoy, "#!/bin/sh\nexec sleep 8\n", { mode: 0o755 });
  // The mounted root CA the XDS connection's TLS needs (the agent refuses to start without it).
  mkdirSync(join(dir, "var/run/secrets/istio"), { recursive: true });
  copyFileSync("/etc/ssl/certs/ca-certificates.crt", join(dir, "var/run/secrets/istio/root-cert.pem"));
  const env = {
    PATH: process.env.PATH ?? "",
    // Unset (Istio's default): platform discovery probes the cloud metadata servers first.
    ...(process.env.STARTUP_CLOUD_PLATFORM ? { CLOUD_PLATFORM: process.env.STARTUP_CLOUD_PLATFORM } : {}),
    POD_NAME: "bench",
    POD_NAMESPACE: "default",
    INSTANCE_IP: "10.0.0.1",
    PROXY_CONFIG: JSON.stringify({ binaryPath: envoy, statusPort: 15999, proxyAdminPort: 15998, terminationDrainDuration: "1s" }),
  };
  const agentCmd = [agent.startsWith("/") ? agent : join(process.cwd(), agent), "proxy", "sidecar"];
  const agentMs: number[] = [];
  const helloMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    // Alternate to spread machine noise over both.
    const a = await startToLine(agentCmd, env, dir, /Agent started/);
    a.proc.kill("SIGKILL");
    await a.proc.exited;
    agentMs.push(a.ms);
    const h = await startToLine([helloBin], env, dir, /ready/);
    h.proc.kill("SIGKILL");
    await h.proc.exited;
    helloMs.push(h.ms);
  }
  // Idle RSS after 3 s, both processes alive at the same time.
  const a = await startToLine(agentCmd, env, dir, /Agent started/);
  const h = await startToLine([helloBin], env, dir, /ready/);
  await Bun.sleep(3000);
  const agentRss = rssKiB(a.proc.pid);
  const helloRss = rssKiB(h.proc.pid);
  a.proc.kill("SIGTERM");
  h.proc.kill("SIGKILL");
  await Promise.all([a.proc.exited, h.proc.exited]);
  rmSync(dir, { recursive: true, force: true });

  const as = summary(agentMs);
  const hs = summary(helloMs);
  return [
    "## Startup (compiled binary)",
    "",
    `\`agent proxy sidecar\` (config from PROXY_CONFIG, a stand-in Envoy) from spawn until the composition root logs "Agent started" (status, SDS and XDS sockets listening, bootstrap written, Envoy spawned), vs a compiled hello-world until it prints; ${RUNS} alternating runs each.`,
    "",
    "| | agent | hello-world | ratio |",
    "|---|---|---|---|",
    `| start, median (ms) | ${fmt(as.median)} | ${fmt(hs.median)} | ${fmt(as.median / hs.median, 2)}× |`,
    `| start, p99 (ms) | ${fmt(as.p99)} | ${fmt(hs.p99)} | ${fmt(as.p99 / hs.p99, 2)}× |`,
    `| idle RSS after 3 s (MiB) | ${fmt(agentRss / 1024)} | ${fmt(helloRss / 1024)} | ${fmt(agentRss / helloRss, 2)}× |`,
    "",
  ].join("\n");
}
