// Load against the compiled agent: 10,000 pushes relayed in order; 200 ADS streams opened at
// once (the agent relays one: the newest wins, the others end CANCELLED); 200 SDS streams at once
// answered from the cache with no extra CA call. Throughout, a prober in a process of its own
// hits /healthz/ready every 10 ms: every probe answered, p99 within 100 ms (status-prober.ts says
// how the bound follows the machine's load).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { discoveryTypes, FakeIstiod } from "../support/fake-istiod.ts";
import { decodeDiscoveryResponse, decodeSecret, greeterTable } from "../e2e/envoy-resources.ts";
import { fetchSecret, startMesh, type Mesh } from "../e2e/mesh.ts";
import { fileIfExists, until, type Pod } from "../e2e/pod.ts";
import { podBesideIstiod } from "./proxyless-pod.ts";
import { CDS, EnvoyClient, TYPES } from "../xds/harness.ts";
import { expectStatusBounds, startStatusProber } from "./status-prober.ts";

const PUSHES = Number(process.env.FAULTS_LOAD_PUSHES ?? 10_000);
const STREAMS = Number(process.env.FAULTS_LOAD_STREAMS ?? 200);

let istiod: FakeIstiod;
let pod: Pod;

/** CPU time (user + system, ms) the process has used: to tell the agent's own cost from the machine's load. */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

const versionOf = (b: Buffer) => (TYPES.Res.toObject(TYPES.Res.decode(b)) as { versionInfo?: string }).versionInfo ?? "";

describe("load (compiled agent)", () => {
  podBesideIstiod("load", (s) => ({ pod, istiod } = s));

  test(`${PUSHES} pushes arrive whole, once each, in order; the status port answers throughout`, async () => {
    const probe = await startStatusProber(pod.statusPort);
    const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    envoy.send({ typeUrl: CDS });
    const up = await istiod.nextStream(10_000);
    await up.nextRequest((r) => r.typeUrl === CDS);
    const cpu0 = cpuMs(pod.agent.proc.pid);
    const t0 = performance.now();
    const value = Buffer.alloc(256, 7);
    for (let i = 1; i <= PUSHES; i++) {
      if (!up.send({ typeUrl: CDS, versionInfo: `v${i}`, resources: [{ typeUrl: CDS, value }] })) await new Promise((r) => up.call.once("drain", r));
    }
    await envoy.waitFor(PUSHES, 120_000);
    const ms = performance.now() - t0;
    const probed = await probe.stop();
    const got = envoy.received.map(versionOf);
    expect(got.length).toBe(PUSHES);
    expect(got).toEqual(Array.from({ length: PUSHES }, (_, i) => `v${i + 1}`));
    expect(pod.exitCode()).toBeNull();
    envoy.close();
    console.log(`load: ${PUSHES} pushes in order in ${(ms / 1000).toFixed(1)} s (agent CPU ${cpuMs(pod.agent.proc.pid) - cpu0} ms)`);
    expectStatusBounds(probed, `${PUSHES} pushes`);
  }, 180_000);

  test(`${STREAMS} ADS streams at once: the newest is served, the others end CANCELLED`, async () => {
    istiod.onStream = (s) =>
      s.call.on("data", () => {
        const r = s.requests[s.requests.length - 1]!;
        if (r.typeUrl === CDS && !r.responseNonce) s.send({ typeUrl: CDS, versionInfo: r.versionInfo ?? "", resources: [] });
      });
    const probe = await startStatusProber(pod.statusPort);
    const clients = Array.from({ length: STREAMS }, () => new EnvoyClient(pod.path("etc/istio/proxy/XDS")));
    clients.forEach((c, i) => c.send({ typeUrl: CDS, versionInfo: `s${i}` }));
    // Every stream but one ends; wait for those statuses (the sentinel), then look at the survivor.
    const ended: grpc.StatusObject[] = [];
    for (const c of clients) void c.status.then((s) => ended.push(s));
    await until(pod, `${STREAMS - 1} streams ended`, () => (ended.length >= STREAMS - 1 ? true : undefined), 60_000);
    const survivors = await Promise.all(
      clients.map(async (c) => ((await Promise.race([c.status.then(() => false), Bun.sleep(0).then(() => true)])) ? c : undefined)),
    );
    const live = survivors.filter((c): c is EnvoyClient => c !== undefined);
    expect(live.length).toBe(1);
    await live[0]!.waitFor(1, 10_000);
    expect(ended.every((s) => s.code === grpc.status.CANCELLED)).toBe(true);
    expect(ended.filter((s) => s.details.includes("replaced by a new stream")).length).toBe(STREAMS - 1);
    const probed = await probe.stop();
    expect(pod.exitCode()).toBeNull();
    for (const c of clients) c.close();
    console.log(`load: ${STREAMS} ADS streams: 1 served (${versionOf(live[0]!.received[0]!)}), ${ended.length} CANCELLED`);
    expectStatusBounds(probed, `${STREAMS} ADS streams`);
  }, 90_000);
});

describe("load: SDS (compiled agent)", () => {
  let mesh: Mesh | undefined;
  beforeAll(async () => {
    // E2E_ENVOY_XDS: the Envoy stand-in takes CDS and LDS, so the agent is ready during the burst and
    // the probes measure the status port, not the stand-in's admin API (a busy Bun process here;
    // a not-ready answer queries it, as Istio's does).
    mesh = await startMesh(greeterTable(9), { env: { OUTPUT_CERTS: "etc/certs", E2E_ENVOY_XDS: "1" } });
  }, 30_000);
  afterAll(async () => {
    await mesh?.cleanup();
  });

  test(`${STREAMS} SDS streams at once are answered from the cache, with no extra CA call`, async () => {
    const m = mesh!;
    const chain = await until(m.pod, "first certificate", () => fileIfExists(m.pod.path("etc/certs/cert-chain.pem")));
    await until(m.pod, "the SDS socket", () => (existsSync(m.pod.path("var/run/secrets/workload-spiffe-uds/socket")) ? true : undefined));
    await until(m.pod, "ready", async () => ((await fetch(`http://127.0.0.1:${m.pod.statusPort}/healthz/ready`)).status === 200 ? true : undefined));
    const n0 = m.ca.requests.length;
    const probe = await startStatusProber(m.pod.statusPort);
    const { Req } = discoveryTypes();
    const enc = (typeUrl: string, names: string[]) => Buffer.from(Req.encode(Req.create({ typeUrl, resourceNames: names })).finish());
    const cpu0 = cpuMs(m.pod.agent.proc.pid);
    const t0 = performance.now();
    const answers = await Promise.all(
      Array.from({ length: STREAMS }, () => fetchSecret(m.pod.path("var/run/secrets/workload-spiffe-uds/socket"), "default", enc, 60_000)),
    );
    const ms = performance.now() - t0;
    const chains = answers.map((b) => decodeSecret(decodeDiscoveryResponse(b).resources[0]!.value).certificateChain);
    expect(new Set(chains).size).toBe(1);
    expect(chains[0]).toBe(chain);
    expect(m.ca.requests.length).toBe(n0);
    const probed = await probe.stop();
    console.log(
      `load: ${STREAMS} SDS streams answered from the cache in ${ms.toFixed(0)} ms (agent CPU ${cpuMs(m.pod.agent.proc.pid) - cpu0} ms), ${m.ca.requests.length - n0} extra CA calls`,
    );
    expectStatusBounds(probed, `${STREAMS} SDS streams`);
  }, 90_000);
});
