// The cold-start benchmark's Envoy stand-in (compiled by bench/coldstart.ts into its own binary
// so its start-up is a few ms, not a Bun transpile): reads `-c <bootstrap>`, serves the admin API
// the agent's readiness check reads (GET /stats, GET /ready) on the bootstrap's admin port, and
// does what makes a real Envoy ready: dials the bootstrap's `xds-grpc` pipe (the agent's XDS
// socket), asks for CDS and LDS over ADS (SotW), ACKs every response and counts
// `cluster_manager.cds.update_success` / `listener_manager.lds.update_success`. So the agent's
// /healthz/ready answers 200 only once configuration really went file -> agent -> "Envoy".
// Protobuf is written and read by hand (a handful of string fields), to stay small and quick.

import http2 from "node:http2";
import net from "node:net";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { serveEnvoyAdmin, xdsPipe, type StandinBootstrap, type UpdateCounts } from "../test/support/envoy-admin.ts";

const SOTW_PATH = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

/** Length-delimited field `no` holding `bytes`. */
function field(no: number, bytes: Uint8Array): number[] {
  return [...varint((no << 3) | 2), ...varint(bytes.length), ...bytes];
}

const utf8 = (s: string) => new TextEncoder().encode(s);

/** envoy.service.discovery.v3.DiscoveryRequest: version_info=1, node=2 (id=1), type_url=4, response_nonce=5. */
export function discoveryRequest(r: { typeUrl: string; version?: string; nonce?: string; nodeId?: string }): Uint8Array {
  const out: number[] = [];
  if (r.version) out.push(...field(1, utf8(r.version)));
  if (r.nodeId) out.push(...field(2, new Uint8Array(field(1, utf8(r.nodeId)))));
  out.push(...field(4, utf8(r.typeUrl)));
  if (r.nonce) out.push(...field(5, utf8(r.nonce)));
  return new Uint8Array(out);
}

/** version_info=1, type_url=4, nonce=5 of a DiscoveryResponse (other fields skipped). */
export function discoveryResponse(b: Uint8Array): { version: string; typeUrl: string; nonce: string } {
  const res = { version: "", typeUrl: "", nonce: "" };
  let i = 0;
  const read = (): number => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const x = b[i++]!;
      v += (x & 0x7f) * 2 ** shift;
      if (x < 0x80) return v;
      shift += 7;
    }
  };
  const dec = new TextDecoder();
  while (i < b.length) {
    const key = read();
    const wire = key & 7;
    if (wire === 0) read();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = read();
      const s = b.subarray(i, i + len);
      i += len;
      const no = Math.floor(key / 8);
      if (no === 1) res.version = dec.decode(s);
      else if (no === 4) res.typeUrl = dec.decode(s);
      else if (no === 5) res.nonce = dec.decode(s);
    } else throw new Error(`wire type ${wire} not expected in a DiscoveryResponse`);
  }
  return res;
}

function grpcFrame(msg: Uint8Array): Buffer {
  const f = Buffer.alloc(5 + msg.length);
  f.writeUInt32BE(msg.length, 1);
  f.set(msg, 5);
  return f;
}

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
      const res = discoveryResponse(buf.subarray(5, 5 + len));
      buf = buf.subarray(5 + len);
      if (res.typeUrl === CDS) updates.cds++;
      if (res.typeUrl === LDS) updates.lds++;
      req.write(grpcFrame(discoveryRequest({ typeUrl: res.typeUrl, version: res.version, nonce: res.nonce })));
    }
  });
  req.on("error", () => {});
  req.on("close", () => {
    session.close();
    setTimeout(() => subscribe(socket, nodeId, updates), 100);
  });
  req.write(grpcFrame(discoveryRequest({ typeUrl: CDS, nodeId })));
  req.write(grpcFrame(discoveryRequest({ typeUrl: LDS })));
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
