// A/B of local mode's idle memory (issue #16): compiled agents in bench/idle.ts's local shape
// (LOCAL_XDS_PATH=examples/xds.yaml, CA_PROVIDER=local, DISABLE_ENVOY), each build twice: at rest
// (no xDS client: the relay has opened nothing to the local server) and serving (one ADS stream
// held open on its XDS socket by a grpc-js client in this process, as a proxyless application
// holds it: LDS, RDS, CDS and EDS answered through the relay and the local server). All alive at
// once so the machine's load falls on every column alike. Memory is the median of WINDOWS
// readings from STEADY_MS after the first start. IDLE_LOCAL_PODS=N runs N agents of each build and
// shape (the row: the median over them): USS then counts the binary's pages as a pod does, shared
// with the pod's neighbours of the same build, not private to the one agent that touched them.
//   IDLE_AGENTS="before=/tmp/agent-old,after=dist/agent" [IDLE_LOCAL_PODS=5] bun bench/idle-local.ts
// Not part of `bun run bench` (a comparison of builds, like idle-ca.ts).

import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import protobuf from "protobufjs";
import { freePort } from "../test/support/fake-envoy.ts";
import { agents, idlePod, loadavg, steadyMemory, STEADY_MS, WINDOW_MS, WINDOWS } from "./idle-ab-support.ts";
import { fmt, spawnUntil, type Proc } from "./support.ts";

const ROOT = resolve(import.meta.dir, "..");
const PODS = Number(process.env.IDLE_LOCAL_PODS ?? 1);
const TYPES = ["listener.v3.Listener", "route.v3.RouteConfiguration", "cluster.v3.Cluster", "endpoint.v3.ClusterLoadAssignment"].map(
  (t) => `type.googleapis.com/envoy.config.${t}`,
);

/** DiscoveryRequest with the fields used here (type_url 4, node 1 { id 1 }, resource_names 3): no Envoy protos needed. */
const DiscoveryRequest = protobuf.Root.fromJSON({
  nested: {
    Node: { fields: { id: { type: "string", id: 1 } } },
    DiscoveryRequest: {
      fields: {
        node: { type: "Node", id: 1 },
        resource_names: { rule: "repeated", type: "string", id: 3 },
        type_url: { type: "string", id: 4 },
      },
    },
  },
}).lookupType("DiscoveryRequest");

/** One ADS stream on the agent's XDS socket, a request per type; resolves once each type is answered (the call carries later pushes). */
export async function holdAds(socket: string): Promise<{ client: grpc.Client; call: grpc.ClientDuplexStream<Buffer, Buffer> }> {
  const client = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest(
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
    (b: Buffer) => b,
    (b: Buffer) => b,
  );
  call.on("error", () => {});
  let answered = 0;
  const done = new Promise<void>((res, rej) => {
    call.on("data", () => ++answered === TYPES.length && res());
    call.on("status", (s: grpc.StatusObject) => rej(new Error(`ADS stream ended: ${s.code} ${s.details}`)));
  });
  const names: Record<string, string[]> = { [TYPES[1]!]: ["greeter.demo:50051"], [TYPES[3]!]: ["outbound|50051||greeter.demo"] };
  for (const t of TYPES) {
    const msg = { node: { id: "sidecar~127.0.0.1~idle-0.bench~bench.svc.cluster.local" }, type_url: t, resource_names: names[t] ?? [] };
    call.write(Buffer.from(DiscoveryRequest.encode(DiscoveryRequest.fromObject(msg)).finish()));
  }
  await done;
  return { client, call };
}

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "agent-idle-local-"));
  const procs: Proc[] = [];
  const clients: grpc.Client[] = [];
  try {
    const runs: { label: string; shape: string; pid: number }[] = [];
    const t0 = performance.now();
    for (let n = 0; n < PODS; n++) {
      for (const [label, bin] of agents()) {
        for (const shape of ["at rest", "serving"]) {
          const cwd = join(dir, `${label}-${shape === "at rest" ? "rest" : "serving"}-${n}`);
          const env: Record<string, string> = {
            ...idlePod(cwd),
            CA_PROVIDER: "local",
            LOCAL_XDS_PATH: join(ROOT, "examples/xds.yaml"),
            PROXY_CONFIG: JSON.stringify({
              terminationDrainDuration: "1s",
              statusPort: await freePort(),
              proxyAdminPort: await freePort(),
              controlPlaneAuthPolicy: "NONE",
            }),
          };
          const p = await spawnUntil([bin, "proxy", "sidecar"], env, cwd, /local xDS: serving/, 60_000);
          procs.push(p);
          if (shape === "serving") clients.push((await holdAds(join(cwd, "etc/istio/proxy/XDS"))).client);
          runs.push({ label, shape, pid: p.pid });
        }
      }
    }
    const { load, mib } = await steadyMemory(
      runs.map((r) => r.pid),
      t0,
    );
    // One row per build and shape: the median over its PODS agents of each figure.
    const rows = [...new Set(runs.map((r) => `${r.label}\0${r.shape}`))].map((key) => {
      const [label, shape] = key.split("\0") as [string, string];
      const of = runs.flatMap((r, i) => (r.label === label && r.shape === shape ? [mib[i]!] : []));
      const med = (k: "uss" | "rss" | "anon" | "file") => of.map((m) => m[k]).sort((a, b) => a - b)[Math.floor(of.length / 2)]!;
      return `| ${label} | ${shape} | ${fmt(med("uss"))} | ${fmt(med("rss"))} | ${fmt(med("anon"))} | ${fmt(med("file"))} |`;
    });
    return [
      "## Idle memory in local mode (bench/idle-local.ts)",
      "",
      `Local-mode agents (bench/idle.ts's shape), ${PODS} of each build at rest and ${PODS} serving one held ADS stream (LDS, RDS, CDS, EDS answered from examples/xds.yaml), all alive at once; ` +
        `memory the median of ${WINDOWS} readings ${WINDOW_MS / 1000} s apart from ${STEADY_MS / 1000} s after the first start (median over the ${PODS} agents of a row). Load average: ${load} at the start, ${loadavg()} at the end.`,
      "",
      "| build | local mode | USS MiB | RSS MiB | anon RSS MiB (target ≤ 12) | file RSS MiB |",
      "|---|---|---|---|---|---|",
      ...rows,
      "",
    ].join("\n");
  } finally {
    await stopAll(clients, procs, dir);
  }
}

/** Closes the clients, kills the agents, removes their directory. */
export async function stopAll(clients: grpc.Client[], procs: Proc[], dir: string): Promise<void> {
  for (const c of clients) c.close();
  for (const p of procs) p.kill("SIGKILL");
  await Promise.all(procs.map((p) => p.exited));
  rmSync(dir, { recursive: true, force: true });
}

if (import.meta.main) console.log(await run());
