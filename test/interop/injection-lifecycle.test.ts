// Lifecycle differential on pods rendered by Istio's injector (a seeded subset of the injection
// corpus, INTEROP_INJECTION_LIFECYCLE pods, default 12): each pod is run as the kubelet runs it,
// once with Istio's pilot-agent as istio-proxy and once with ours, each in its own pod network
// namespace with the rendered ports. The app containers are one fake app (support/fake-app.ts)
// serving their ports. Compared: the startupProbe's outcome (native sidecar), the postStart hook's
// exit (`pilot-agent wait`, holdApplicationUntilProxyStarts and grpc-agent), the readinessProbe's
// answer once settled, every app container probe as the kubelet sends it (rewritten to the
// agent's /app-health/... or not), and on deletion: the preStop hook (`pilot-agent request POST
// drain`, native sidecar) and the readiness answer after it, then SIGTERM within the grace
// period: the agent's exit code, the admin calls Envoy received in order and whether Envoy was
// stopped. Probes are sent as the kubelet does, to the pod IP; port 15021 is the Envoy stand-in's
// health listener, routed to the bootstrap's `agent` cluster as Envoy routes it. Probe periods
// are shortened to keep the run cheap (the kubelet's periodSeconds only spaces the attempts).

import { beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { istioBootstrapTemplate, ROOT_MARK } from "./support/agent-run.ts";
import { readStandinRecords, writeStandinLauncher } from "./support/envoy-standin.ts";
import { INSTALLS, workloadCase, type WorkloadCase } from "./support/injection-corpus.ts";
import { renderWorkloads, type Container, type Probe } from "./support/injector.ts";
import { container, mountVolumes, podOf, type Pod } from "./support/kubelet.ts";
import { identityFor, proxyProcess } from "./support/injection-pod.ts";
import { startPodNetns, type PodNetns } from "./support/pod-netns.ts";
import { selfSignedCert } from "../support/self-signed.ts";
import { corpusSeed, mapLimit, seededRng } from "./support/seeded.ts";

const FAKE_APP = join(import.meta.dir, "support/fake-app.ts");

/** What the kubelet saw of one pod's life with one agent. */
interface Life {
  startupProbe?: "passed" | "failed";
  /** The hook's exit code, or "running" when it had not finished after HOOK_MS. */
  postStart?: number | "running";
  ready: number;
  appProbes: Record<string, number>;
  preStop?: number | "running";
  readyAfterPreStop?: number;
  exit: number | "killed after the grace period";
  envoyAdminCalls: string[];
  envoyStopped: boolean;
}

/** The subset: round-robin over the kinds of pod, so each shape is in it. */
function subset(cases: WorkloadCase[], n: number): number[] {
  const bucket = (c: WorkloadCase) => `${c.kind}/${c.native}/${c.install === "hold"}`;
  const buckets = new Map<string, number[]>();
  cases.forEach((c, i) => buckets.set(bucket(c), [...(buckets.get(bucket(c)) ?? []), i]));
  const out: number[] = [];
  for (let round = 0; out.length < n && round < cases.length; round++)
    for (const idx of buckets.values()) if (idx[round] !== undefined && out.length < n) out.push(idx[round]!);
  return out;
}

/**
 * How long a hook may run here. The kubelet lets it run (bounded by the grace period for preStop);
 * a proxyless pod's `pilot-agent wait` without istiod runs its full 60 s for both agents, so the
 * harness stops waiting earlier and records that it was still running.
 */
const HOOK_MS = 12_000;

async function inNetns(
  ns: PodNetns,
  argv: string[],
  env: Record<string, string>,
  cwd: string,
  timeoutMs: number,
): Promise<{ code: number | "running"; out: string }> {
  const p = Bun.spawn([...ns.prefix, ...argv], { cwd, env, stdout: "pipe", stderr: "pipe" });
  let timedOut = false;
  const timer = setTimeout(() => ((timedOut = true), p.kill("SIGKILL")), timeoutMs);
  const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
  clearTimeout(timer);
  return { code: timedOut ? "running" : code, out };
}

/** One probe attempt as the kubelet makes it (HTTP GET or TCP connect to the pod IP): the HTTP status, 0 when unanswered. */
async function probeOnce(ns: PodNetns, pod: Pod, c: Container, p: Probe): Promise<number> {
  const port = (v: number | string): number => (typeof v === "number" ? v : (c.ports?.find((x) => x.name === v)?.containerPort ?? 0));
  const timeout = String(p.timeoutSeconds ?? 1);
  if (p.httpGet) {
    const target = port(p.httpGet.port);
    const headers = ((p.httpGet as { httpHeaders?: { name: string; value: string }[] }).httpHeaders ?? []).flatMap((h) => ["-H", `${h.name}: ${h.value}`]);
    const r = await inNetns(
      ns,
      ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", timeout, ...headers, `http://${pod.id.podIP}:${target}${p.httpGet.path ?? "/"}`],
      {},
      "/",
      10_000,
    );
    return Number(r.out) || 0;
  }
  if (p.tcpSocket) {
    const r = await inNetns(
      ns,
      ["curl", "-s", "-o", "/dev/null", "--max-time", timeout, `telnet://${pod.id.podIP}:${port(p.tcpSocket.port)}`],
      {},
      "/",
      10_000,
    );
    // curl's telnet ends with 28 (timeout) on a connection it kept open, 7 when refused.
    return r.code === 7 ? 0 : 200;
  }
  // gRPC (not rewritten) and exec probes are not run by this harness.
  return -1;
}

/** Probe until `done` (default: success) or `attempts` tries, `gapMs` apart: the last answer. */
async function probeUntil(
  ns: PodNetns,
  pod: Pod,
  c: Container,
  p: Probe,
  attempts: number,
  gapMs: number,
  done = (code: number) => code >= 200 && code < 400,
): Promise<number> {
  let code = 0;
  for (let i = 0; i < attempts; i++) {
    code = await probeOnce(ns, pod, c, p);
    if (done(code)) return code;
    await Bun.sleep(gapMs);
  }
  return code;
}

async function live(bin: string, pod: Pod, bootstrapTemplate: string, exitMs: Map<string, number>): Promise<Life> {
  const root = mkdtempSync(join(tmpdir(), "injection-life-"));
  const ns = await startPodNetns(pod.id.podIP);
  const procs: ReturnType<typeof Bun.spawn>[] = [];
  const record = join(root, "standin.jsonl");
  try {
    const proxy = container(pod, "istio-proxy")!;
    mountVolumes(pod, proxy, root);
    mkdirSync(join(root, "var/lib/istio/envoy"), { recursive: true });
    copyFileSync(bootstrapTemplate, join(root, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"));
    const launcher = writeStandinLauncher(root);
    const p = proxyProcess(pod, launcher);
    const fill = (s: string) => s.replaceAll(ROOT_MARK, root);
    const env: Record<string, string> = {
      ...Object.fromEntries(Object.entries(p.env).map(([k, v]) => [k, fill(v)])),
      HOME: root,
      INTEROP_ENVOY_READY: "1",
      INTEROP_ENVOY_RECORD: record,
      INTEROP_ENVOY_HEALTH: "15021",
    };
    const native = (pod.spec.initContainers ?? []).some((c) => c.name === "istio-proxy");
    const apps = pod.spec.containers.filter((c) => c.name !== "istio-proxy");
    const appSpecs = apps.flatMap((c) => (c.ports ?? []).map((x) => `${x.name === "grpc" ? "grpc" : "http"}:${x.containerPort}`));
    const startApp = async () => {
      if (!appSpecs.length) return;
      const a = Bun.spawn([...ns.prefix, process.execPath, FAKE_APP, ...appSpecs], { stdout: "pipe", stderr: "inherit" });
      procs.push(a);
      const reader = (a.stdout as ReadableStream<Uint8Array>).getReader();
      await Promise.race([reader.read(), Bun.sleep(10_000)]);
      reader.releaseLock();
    };
    const hook = async (cmd: string[] | undefined): Promise<number | "running" | undefined> =>
      cmd ? (await inNetns(ns, [bin, ...cmd.slice(1)], env, root, HOOK_MS)).code : undefined;

    const life: Life = { ready: 0, appProbes: {}, exit: 0, envoyAdminCalls: [], envoyStopped: false };
    // Start order: init containers (a native istio-proxy: its startupProbe gates what follows),
    // then containers in order, each container's postStart hook finishing before the next starts.
    const proxyFirst = native || pod.spec.containers.findIndex((c) => c.name === "istio-proxy") === 0;
    if (!proxyFirst) await startApp();
    const agent = Bun.spawn([...ns.prefix, bin, ...p.args.map(fill)], { cwd: root, env, stdout: "ignore", stderr: "ignore" });
    procs.push(agent);
    if (proxy.startupProbe) life.startupProbe = (await probeUntil(ns, pod, proxy, proxy.startupProbe, 60, 250)) === 200 ? "passed" : "failed";
    life.postStart = await hook(proxy.lifecycle?.postStart?.exec?.command);
    if (proxyFirst) await startApp();
    if (proxy.readinessProbe) life.ready = await probeUntil(ns, pod, proxy, proxy.readinessProbe, 60, 250);
    for (const c of apps)
      for (const kind of ["readinessProbe", "livenessProbe", "startupProbe"] as const) {
        const pr = c[kind];
        // The first answer (a timed-out attempt is retried, as the kubelet's next period would).
        if (pr) life.appProbes[`${c.name}/${kind}`] = await probeUntil(ns, pod, c, pr, 5, 200, (code) => code !== 0);
      }

    // Deletion. Native: the app containers stop first, then the sidecar's preStop hook, then
    // its SIGTERM. Classic: every container's preStop, then SIGTERM to all at once.
    const grace = (pod.spec.terminationGracePeriodSeconds ?? 30) * 1000;
    const app = procs.find((x) => x !== agent);
    if (native) {
      app?.kill("SIGTERM");
      await app?.exited;
    }
    life.preStop = await hook(proxy.lifecycle?.preStop?.exec?.command);
    if (life.preStop !== undefined && proxy.readinessProbe) life.readyAfterPreStop = await probeOnce(ns, pod, proxy, proxy.readinessProbe);
    const t0 = performance.now();
    agent.kill("SIGTERM");
    if (!native) app?.kill("SIGTERM");
    // Ended = gone or a zombie, read from /proc: the spawn's exit promise can resolve late when
    // many children end at once, which would look like an agent outliving the grace period.
    while (alive(agent.pid) && agent.exitCode === null && performance.now() - t0 < grace) await Bun.sleep(50);
    // Timing is printed, not compared (the machine's load decides it).
    exitMs.set(bin, Math.round(performance.now() - t0));
    life.exit = !alive(agent.pid) || agent.exitCode !== null ? await agent.exited : "killed after the grace period";
    const records = readStandinRecords(record);
    life.envoyAdminCalls = records.filter((r) => r.event === "admin").map((r) => r.message ?? "");
    const envoyPids = records.filter((r) => r.event === "start").map((r) => r.pid);
    // A SIGKILLed process takes a moment to be gone on a loaded machine: bounded wait.
    for (let i = 0; i < 60 && envoyPids.some(alive); i++) await Bun.sleep(50);
    life.envoyStopped = envoyPids.length > 0 && envoyPids.every((pid) => !alive(pid));
    return life;
  } finally {
    for (const x of procs) x.kill("SIGKILL");
    for (const r of readStandinRecords(record))
      if (r.event === "start")
        try {
          process.kill(r.pid, "SIGKILL");
        } catch {}
    await ns.close();
    rmSync(root, { recursive: true, force: true });
  }
}

/** A process that has not ended (a zombie, ended but not yet reaped by its new parent, counts as ended). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

describeRequiring(
  { root: true, tools: ["unshare", "nsenter", "ip", "curl", "openssl"], apt: ["util-linux", "iproute2", "curl", "openssl"], check: interopUnmet },
  "injection lifecycle differential: rendered pods run as the kubelet runs them, ours vs Istio's pilot-agent",
  () => {
    const seed = corpusSeed(31);
    const corpus = Number(process.env.INTEROP_INJECTION_CASES ?? 200);
    const size = Number(process.env.INTEROP_INJECTION_LIFECYCLE ?? 12);
    const rng = seededRng(seed);
    const cases = Array.from({ length: corpus }, (_, i) => workloadCase(rng, i));
    // INTEROP_INJECTION_ONLY=<workload name>: that pod alone (reproducing a failure).
    const only = process.env.INTEROP_INJECTION_ONLY;
    const chosen = only ? cases.flatMap((c, i) => (c.name === only ? [i] : [])) : subset(cases, size);
    let pods: Pod[] = [];

    beforeAll(async () => {
      const rootCert = selfSignedCert("/O=cluster.local", 2).cert;
      const rendered = await renderWorkloads(
        INSTALLS,
        chosen.map((i) => cases[i]!),
      );
      pods = rendered.map((r, k) => {
        if (!r.object) throw new Error(`injector refused ${r.name}: ${r.error}`);
        return podOf(r.object, identityFor(cases[chosen[k]!]!, chosen[k]!, rootCert));
      });
    }, 180_000);

    test(`${size} rendered pods (seed ${seed}): the same probe answers, hook exits, exit code and Envoy drain order`, async () => {
      requireBinary();
      const template = istioBootstrapTemplate();
      console.log(
        `injection lifecycle: seed ${seed}, pods ${chosen.map((i) => `${cases[i]!.name} (${cases[i]!.kind}${cases[i]!.native ? ", native" : ""}, ${cases[i]!.install})`).join(", ")}`,
      );
      const failures: string[] = [];
      await mapLimit(pods, 3, async (pod, k) => {
        const exitMs = new Map<string, number>();
        const [theirs, ours] = await Promise.all([live(PILOT_AGENT, pod, template, exitMs), live(DIST_AGENT, pod, template, exitMs)]);
        const c = cases[chosen[k]!]!;
        console.log(
          `injection lifecycle: ${c.name}: SIGTERM to exit: Istio ${exitMs.get(PILOT_AGENT)} ms, ours ${exitMs.get(DIST_AGENT)} ms (load ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]})`,
        );
        if (JSON.stringify(theirs) !== JSON.stringify(ours))
          failures.push(`${c.name} (install ${c.install}): ${JSON.stringify(c.object)}\n  Istio ${JSON.stringify(theirs)}\n  ours  ${JSON.stringify(ours)}`);
        else console.log(`injection lifecycle: ${c.name}: ${JSON.stringify(ours)}`);
      });
      if (failures.length) console.log(`injection lifecycle: ${failures.length}/${pods.length} pods differ (seed ${seed}):\n\n${failures.join("\n\n")}`);
      expect(failures).toEqual([]);
    }, 900_000);
  },
);
