// The cold-start benchmark's Envoy stand-in (compiled by bench/coldstart.ts into its own binary
// so its start-up is a few ms, not a Bun transpile): reads `-c <bootstrap>`, serves the admin API
// the agent's readiness check reads (GET /stats, GET /ready) on the bootstrap's admin port, and
// does what makes a real Envoy ready: dials the bootstrap's `xds-grpc` pipe (the agent's XDS
// socket), asks for CDS and LDS over ADS (SotW), ACKs every response and counts
// `cluster_manager.cds.update_success` / `listener_manager.lds.update_success`. So the agent's
// /healthz/ready answers 200 only once configuration really went file -> agent -> "Envoy".
// Protobuf is written and read by hand (a handful of string fields), to stay small and quick:
// bench/envoy-fast.ts's codec, which the start -> ready stand-in uses too.

import http2 from "node:http2";
import net from "node:net";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { serveEnvoyAdmin, xdsPipe, type StandinBootstrap, type UpdateCounts } from "../test/support/envoy-admin.ts";
import { decodeResponse, encodeRequest, frame } from "./envoy-fast.ts";

const SOTW_PATH = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";

/** CDS + LDS over ADS until the stream ends; then again after 100 ms (as Envoy reconnects). */
function subscribe(socket: string, nodeId: string, updates: UpdateCounts): void {
  const session = http2.connect("http://localhost", { createConnection: () => net.connect(socket) });
  session.on("error", () => {});
  const req = session.request({ ":method": "POST", ":path": SOTW_PATH, "content-type": "application/grpc", te: "trailers" });
  let buf: Buffer = Buffer.alloc(0);
  req.on("data", (c: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, c]) : c;
    while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
      const len = buf.readUInt32BE(1);
      const res = decodeResponse(buf.subarray(5, 5 + len));
      buf = buf.subarray(5 + len);
      if (res.typeUrl === CDS) updates.cds++;
      if (res.typeUrl === LDS) updates.lds++;
      req.write(frame(encodeRequest({ typeUrl: res.typeUrl, version: res.version, nonce: res.nonce })));
    }
  });
  req.on("error", () => {});
  req.on("close", () => {
    session.close();
    setTimeout(() => subscribe(socket, nodeId, updates), 100);
  });
  req.write(frame(encodeRequest({ typeUrl: CDS, node: { id: nodeId } })));
  req.write(frame(encodeRequest({ typeUrl: LDS })));
}

function main(): void {
  const argv = process.argv.slice(2);
  const bootstrap = JSON.parse(readFileSync(argv[argv.indexOf("-c") + 1]!, "utf8")) as StandinBootstrap;
  const pipe = xdsPipe(bootstrap);
  const updates: UpdateCounts = { cds: 0, lds: 0 };
  if (pipe) subscribe(resolve(pipe), bootstrap.node?.id ?? "", updates);
  serveEnvoyAdmin(bootstrap, updates);
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => process.exit(0));
  // The benchmark SIGKILLs the agent: leave with it (re-parented = the agent is gone).
  const parent = process.ppid;
  setInterval(() => process.ppid !== parent && process.exit(0), 50);
}

if (import.meta.main) main();
