#!/usr/bin/env bun
// The interop suites' Envoy stand-in, started by either agent (ours or Istio's pilot-agent)
// through a launcher script. It records its arguments and a copy of its bootstrap (one JSON line
// in INTEROP_ENVOY_RECORD), answers the admin API as Envoy does for readiness, and with
// INTEROP_ENVOY_XDS=sotw|delta acts as Envoy's xDS client: it dials the bootstrap's `xds-grpc`
// pipe, sends the bootstrap's Node in the first request (as Envoy does), subscribes to CDS and
// LDS, then to EDS for the EDS clusters and RDS for the route names in the listeners, and ACKs
// every response. Each response is recorded as {"event":"xds", typeUrl, names}. With
// INTEROP_ENVOY_READY=1 its stats say config was received without any xDS stream.
// INTEROP_ENVOY_STATS adds stat lines (`;`-separated `name: value`) to its /stats, e.g. the
// `listener.*.downstream_cx_active` gauges a drain polls: the stand-in assumes of Envoy only that
// it lists such gauges under those names, filtered by `filter=<regex>` on the name, and that
// /stats?usedonly ignores nothing the agents look for. Admin calls that change Envoy's state are
// recorded as {"event":"admin", message: "POST /drain_listeners?graceful"}, the readiness and
// stats polls (many, timing-dependent) as {"event":"admin-poll", message: path?query}; SIGTERM/SIGINT as {"event":"signal"} before it exits 0
// (SIGKILL leaves no record).
// With INTEROP_ENVOY_SDS=1 it also opens Envoy's two SDS streams on the bootstrap's `sds-grpc` pipe
// (the workload certificate `default` and `ROOTCA`), ACKs and records each answer as
// {"event":"sds", names}.
// With INTEROP_ENVOY_HEALTH=<port> it serves Envoy's health listener there (/healthz/ready, routed
// to the bootstrap's `agent` cluster as Envoy routes it).

import { appendFileSync, chmodSync, readFileSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { join, resolve } from "node:path";
import { envoyProtoRoot } from "../../support/envoy-protos.ts";
import { clusterPipe, serveEnvoyAdmin, xdsPipe, type StandinBootstrap } from "../../support/envoy-admin.ts";
import { watchSecrets } from "./sds-watch.ts";

export const T = (n: string): string => `type.googleapis.com/envoy.${n}`;
export const CDS = T("config.cluster.v3.Cluster");
export const LDS = T("config.listener.v3.Listener");
export const RDS = T("config.route.v3.RouteConfiguration");
export const EDS = T("config.endpoint.v3.ClusterLoadAssignment");
const HCM = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

export interface StandinRecord {
  event: "start" | "xds" | "xds-end" | "sds" | "signal" | "error" | "admin" | "admin-poll";
  argv?: string[];
  cwd?: string;
  bootstrap?: string;
  typeUrl?: string;
  names?: string[];
  message?: string;
  pid: number;
}

/** Write an executable `envoy` launcher in `dir` running this script with the current Bun. */
export function writeStandinLauncher(dir: string): string {
  const path = join(dir, "envoy");
  writeFileSync(path, `#!/bin/sh\nexec "${process.execPath}" "${import.meta.path}" "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

export function readStandinRecords(file: string): StandinRecord[] {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as StandinRecord);
  } catch {
    return [];
  }
}

/** SIGKILL every stand-in that recorded its start in `file` (it outlives an agent killed outright). */
export function killStandins(file: string): void {
  for (const r of readStandinRecords(file))
    if (r.event === "start")
      try {
        process.kill(r.pid, "SIGKILL");
      } catch {}
}

/** JSON value -> google.protobuf.Value in protobufjs object form (protobufjs' bundled struct.proto is camelCase). */
function toValue(v: unknown): Record<string, unknown> {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  return { structValue: toStruct(v as Record<string, unknown>) };
}
function toStruct(o: Record<string, unknown>): Record<string, unknown> {
  return { fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, toValue(v)])) };
}

function routeNames(listenerBytes: Uint8Array): string[] {
  const root = envoyProtoRoot();
  const L = root.lookupType("envoy.config.listener.v3.Listener");
  const H = root.lookupType(HCM);
  const l = L.toObject(L.decode(listenerBytes)) as {
    filter_chains?: { filters?: { typed_config?: { type_url: string; value: Uint8Array } }[] }[];
    api_listener?: { api_listener?: { type_url: string; value: Uint8Array } };
  };
  const out: string[] = [];
  const take = (a?: { type_url: string; value: Uint8Array }) => {
    if (!a || !a.type_url.endsWith(HCM)) return;
    const h = H.toObject(H.decode(a.value)) as { rds?: { route_config_name?: string } };
    if (h.rds?.route_config_name) out.push(h.rds.route_config_name);
  };
  for (const fc of l.filter_chains ?? []) for (const f of fc.filters ?? []) take(f.typed_config);
  take(l.api_listener?.api_listener);
  return out;
}

function edsClusters(clusterBytes: Uint8Array): string[] {
  const C = envoyProtoRoot().lookupType("envoy.config.cluster.v3.Cluster");
  const c = C.toObject(C.decode(clusterBytes), { enums: String }) as { name: string; type?: string; eds_cluster_config?: { service_name?: string } };
  return c.type === "EDS" ? [c.eds_cluster_config?.service_name || c.name] : [];
}

/** One ADS stream, SotW or Delta, following CDS->EDS and LDS->RDS as Envoy does. */
function runAds(
  socket: string,
  mode: "sotw" | "delta",
  node: Record<string, unknown>,
  record: (r: Omit<StandinRecord, "pid">) => void,
  updates: { cds: number; lds: number },
): Promise<void> {
  const root = envoyProtoRoot();
  const delta = mode === "delta";
  const Req = root.lookupType(`envoy.service.discovery.v3.${delta ? "Delta" : ""}DiscoveryRequest`);
  const Res = root.lookupType(`envoy.service.discovery.v3.${delta ? "Delta" : ""}DiscoveryResponse`);
  const session = http2.connect("http://localhost", { createConnection: () => net.connect(socket) });
  session.on("error", () => {});
  const path = `/envoy.service.discovery.v3.AggregatedDiscoveryService/${delta ? "Delta" : "Stream"}AggregatedResources`;
  const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
  let first = true;
  const subscribed = new Map<string, Set<string>>();
  const send = (obj: Record<string, unknown>) => {
    if (first) obj.node = node;
    first = false;
    const msg = Req.encode(Req.fromObject(obj)).finish();
    const frame = Buffer.alloc(5 + msg.length);
    frame.writeUInt32BE(msg.length, 1);
    frame.set(msg, 5);
    if (!stream.closed && !stream.destroyed) stream.write(frame);
  };
  const subscribe = (typeUrl: string, names: string[]) => {
    const have = subscribed.get(typeUrl) ?? new Set<string>();
    const fresh = names.filter((n) => !have.has(n));
    const wildcard = names.length === 0 && !subscribed.has(typeUrl);
    if (!fresh.length && !wildcard) return;
    for (const n of fresh) have.add(n);
    subscribed.set(typeUrl, have);
    if (delta) send({ type_url: typeUrl, resource_names_subscribe: fresh });
    else send({ type_url: typeUrl, resource_names: [...have] });
  };
  const onMessage = (body: Buffer) => {
    const o = Res.toObject(Res.decode(body)) as {
      type_url: string;
      nonce?: string;
      version_info?: string;
      system_version_info?: string;
      resources?: ({ type_url: string; value: Uint8Array } | { name?: string; resource?: { type_url: string; value: Uint8Array } })[];
    };
    const bodies: Uint8Array[] = [];
    const names: string[] = [];
    for (const r of o.resources ?? []) {
      if ("resource" in r || "name" in r) {
        const d = r as { name?: string; resource?: { value: Uint8Array } };
        names.push(d.name ?? "");
        if (d.resource) bodies.push(d.resource.value);
      } else {
        bodies.push((r as { value: Uint8Array }).value);
      }
    }
    const typeUrl = o.type_url;
    if (!delta) {
      const t = root.lookupType(typeUrl.replace("type.googleapis.com/", ""));
      for (const b of bodies) {
        const x = t.toObject(t.decode(b)) as { name?: string; cluster_name?: string };
        names.push(x.name ?? x.cluster_name ?? "");
      }
    }
    record({ event: "xds", typeUrl, names });
    // ACK first, then follow the references, as Envoy does.
    if (delta) send({ type_url: typeUrl, response_nonce: o.nonce ?? "" });
    else send({ type_url: typeUrl, version_info: o.version_info ?? "", response_nonce: o.nonce ?? "", resource_names: [...(subscribed.get(typeUrl) ?? [])] });
    if (typeUrl === CDS) {
      updates.cds++;
      subscribe(EDS, bodies.flatMap(edsClusters));
    }
    if (typeUrl === LDS) {
      updates.lds++;
      subscribe(RDS, bodies.flatMap(routeNames));
    }
  };
  let buf: Buffer = Buffer.alloc(0);
  stream.on("data", (c: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, c]) : c;
    while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
      const len = buf.readUInt32BE(1);
      const body = buf.subarray(5, 5 + len);
      buf = buf.subarray(5 + len);
      try {
        onMessage(body);
      } catch (e) {
        record({ event: "error", message: `undecodable response: ${(e as Error).message}` });
      }
    }
  });
  stream.on("error", () => {});
  subscribe(CDS, []);
  subscribe(LDS, []);
  return new Promise((res) => stream.on("close", () => (session.close(), res())));
}

interface AgentCluster {
  name: string;
  load_assignment?: { endpoints?: { lb_endpoints?: { endpoint?: { address?: { socket_address?: { address?: string; port_value?: number } } } }[] }[] };
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const recordFile = process.env.INTEROP_ENVOY_RECORD;
  const record = (r: Omit<StandinRecord, "pid">): void => {
    if (recordFile) appendFileSync(recordFile, JSON.stringify({ ...r, pid: process.pid }) + "\n");
  };
  const bootstrapPath = argv[argv.indexOf("-c") + 1] ?? "";
  let text = "";
  try {
    text = readFileSync(bootstrapPath, "utf8");
  } catch (e) {
    record({ event: "error", message: `cannot read bootstrap ${bootstrapPath}: ${(e as Error).message}` });
  }
  record({ event: "start", argv, cwd: process.cwd(), bootstrap: text });
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => (record({ event: "signal", message: sig }), process.exit(0)));
  let b: StandinBootstrap = {};
  try {
    b = JSON.parse(text) as StandinBootstrap;
  } catch {}
  // INTEROP_ENVOY_READY=1: report config received without an xDS stream (status differential).
  const preset = process.env.INTEROP_ENVOY_READY === "1" ? 1 : 0;
  const updates = { cds: preset, lds: preset };
  const mode = process.env.INTEROP_ENVOY_XDS;
  if (mode === "sotw" || mode === "delta") {
    const pipe = xdsPipe(b);
    const n = b.node ?? {};
    const node = { id: n.id, cluster: n.cluster, locality: n.locality, metadata: toStruct(n.metadata ?? {}), user_agent_name: "envoy" };
    if (pipe) {
      void (async () => {
        for (;;) {
          await runAds(resolve(pipe), mode, node, record, updates);
          record({ event: "xds-end" });
          await Bun.sleep(200);
        }
      })();
    } else record({ event: "error", message: "no xds-grpc pipe in the bootstrap" });
  }
  if (process.env.INTEROP_ENVOY_SDS === "1") {
    const pipe = clusterPipe(b, "sds-grpc");
    const n = b.node ?? {};
    const node = { id: n.id, cluster: n.cluster, metadata: toStruct(n.metadata ?? {}), user_agent_name: "envoy" };
    // One stream per secret, as Envoy opens them.
    if (pipe)
      for (const name of ["default", "ROOTCA"])
        watchSecrets(resolve(pipe), [name], {
          node,
          reopenMs: 200,
          onResponse: (secrets) => record({ event: "sds", names: secrets.map((s) => s.name) }),
          onError: (message) => record({ event: "error", message }),
        });
    else record({ event: "error", message: "no sds-grpc pipe in the bootstrap" });
  }
  const extra = (process.env.INTEROP_ENVOY_STATS ?? "")
    .split(";")
    .map((l) => l.trim())
    .filter(Boolean);
  // INTEROP_ENVOY_HEALTH=<port>: Envoy's health listener (the bootstrap's 15021 listener), which
  // routes /healthz/ready to the bootstrap's `agent` cluster (the agent's status port).
  const health = Number(process.env.INTEROP_ENVOY_HEALTH ?? 0);
  if (health > 0) {
    const agent = (b as { static_resources?: { clusters?: AgentCluster[] } }).static_resources?.clusters?.find((c) => c.name === "agent");
    const sa = agent?.load_assignment?.endpoints?.[0]?.lb_endpoints?.[0]?.endpoint?.address?.socket_address;
    Bun.serve({
      port: health,
      hostname: "0.0.0.0",
      async fetch(req) {
        const url = new URL(req.url);
        if (url.pathname !== "/healthz/ready" || !sa) return new Response("not found\n", { status: 404 });
        try {
          const r = await fetch(`http://${sa.address?.includes(":") ? `[${sa.address}]` : sa.address}:${sa.port_value}/healthz/ready`, {
            signal: AbortSignal.timeout(3000),
          });
          return new Response(await r.text(), { status: r.status });
        } catch {
          return new Response("upstream connect error\n", { status: 503 });
        }
      },
    });
  }
  // Readiness and stats polls are many and timing-dependent: recorded apart from the calls that change Envoy's state.
  serveEnvoyAdmin(b, updates, {
    stats: extra,
    onRequest: (method, path) =>
      record(
        path.startsWith("/ready") || path.startsWith("/stats") ? { event: "admin-poll", message: path } : { event: "admin", message: `${method} ${path}` },
      ),
  });
}

if (import.meta.main) await main();
