// Small real servers for the status-server tests: an imitation of Envoy's admin `/stats` and
// 15090 `/stats/prometheus` answers, HTTP/HTTPS/TCP applications that record what reached them,
// and gRPC health servers (@grpc/grpc-js). All listen on ephemeral ports; call close() after.

import * as grpc from "@grpc/grpc-js";
import net from "node:net";
import { networkInterfaces } from "node:os";

export interface Recorded {
  path: string;
  headers: Record<string, string>;
  remote: string | undefined;
}

/** Envoy admin imitation: `/stats?usedonly&filter=<regex>` filters `stats` lines; `/stats/prometheus` serves `prometheus`. */
export function startFakeEnvoyAdmin(init: { stats?: string; prometheus?: string | (() => ReadableStream<Uint8Array> | string); hostname?: string } = {}) {
  const state = { stats: init.stats ?? "", prometheus: init.prometheus ?? "", queries: [] as string[], statsStatus: 200 };
  const server = Bun.serve({
    port: 0,
    hostname: init.hostname ?? "127.0.0.1",
    fetch(req) {
      const u = new URL(req.url);
      if (u.pathname === "/stats") {
        state.queries.push(u.search);
        if (state.statsStatus !== 200) return new Response("admin error", { status: state.statsStatus });
        const filter = u.searchParams.get("filter");
        const re = filter ? new RegExp(filter) : undefined;
        const lines = state.stats.split("\n").filter((l) => l.trim() && (!re || re.test(l.split(":")[0]!)));
        return new Response(lines.map((l) => l + "\n").join(""));
      }
      if (u.pathname === "/stats/prometheus") {
        state.queries.push(`prometheus${u.search}|accept=${req.headers.get("accept")}`);
        const p = state.prometheus;
        return new Response(typeof p === "function" ? p() : p, { headers: { "content-type": "text/plain; version=0.0.4" } });
      }
      return new Response("not found", { status: 404 });
    },
  });
  return { state, port: server.port!, close: () => server.stop(true) };
}

/** HTTP app: `routes` maps a path to a handler; every request is recorded. */
export function startHttpApp(
  routes: Record<string, (req: Request) => Response | Promise<Response>>,
  opts: { hostname?: string; tls?: { cert: string; key: string } } = {},
) {
  const seen: Recorded[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: opts.hostname ?? "127.0.0.1",
    tls: opts.tls,
    async fetch(req, srv) {
      const u = new URL(req.url);
      seen.push({ path: u.pathname + u.search, headers: Object.fromEntries(req.headers), remote: srv.requestIP(req)?.address });
      const h = routes[u.pathname];
      return h ? h(req) : new Response("no such route", { status: 404 });
    },
  });
  return { seen, port: server.port!, close: () => server.stop(true) };
}

/** TCP app that records the remote address of each connection. */
export async function startTcpApp(hostname = "127.0.0.1") {
  const remotes: string[] = [];
  const waiting: (() => void)[] = [];
  const server = net.createServer((s) => {
    remotes.push(s.remoteAddress ?? "");
    for (const w of waiting.splice(0)) w();
    s.on("error", () => {});
    s.end();
  });
  await new Promise<void>((r) => server.listen(0, hostname, r));
  /**
   * Resolves once `count` connections in all have been accepted. A prober's answer can arrive
   * before this process has run its accept callback: wait for it, never read `remotes` at once.
   */
  const accepted = (count: number) =>
    new Promise<void>((resolve) => {
      const check = () => (remotes.length >= count ? resolve() : void waiting.push(check));
      check();
    });
  return { remotes, accepted, port: (server.address() as net.AddressInfo).port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A port nothing listens on. */
export { freePort as closedPort } from "./ports.ts";

/** gRPC server; with `statuses` it implements grpc.health.v1.Health/Check (service name -> ServingStatus number). */
export async function startGrpcHealthApp(statuses?: Record<string, number>, opts: { delayMs?: number } = {}) {
  const server = new grpc.Server();
  const calls: { service: string; peer: string; userAgent: string[] }[] = [];
  const id = (b: Buffer) => b;
  if (statuses) {
    const def: grpc.ServiceDefinition = {
      Check: {
        path: "/grpc.health.v1.Health/Check",
        requestStream: false,
        responseStream: false,
        requestSerialize: id,
        requestDeserialize: id,
        responseSerialize: id,
        responseDeserialize: id,
      },
    };
    server.addService(def, {
      Check: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const req = call.request;
        const service = req.length > 2 && req[0] === 0x0a ? req.subarray(2, 2 + req[1]!).toString() : "";
        calls.push({ service, peer: call.getPeer(), userAgent: call.metadata.get("user-agent").map(String) });
        const answer = () => {
          const st = statuses[service];
          if (st === undefined) cb({ code: grpc.status.NOT_FOUND, details: "unknown service" });
          else cb(null, Buffer.from([0x08, st]));
        };
        if (opts.delayMs) setTimeout(answer, opts.delayMs);
        else answer();
      },
    });
  }
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
  return { calls, port, close: () => server.forceShutdown() };
}

/** The first non-loopback IPv4 address of this machine, if any. */
export function nonLoopbackIPv4(): string | undefined {
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  }
  return undefined;
}
