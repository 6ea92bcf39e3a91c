// A stand-in Envoy for timing start -> ready, compiled by the bench before it runs
// (`compileFastEnvoy`). The interop stand-in (test/interop/support/envoy-standin.ts) runs from
// source and loads Envoy's protos through protobufjs before its first request: 250-500 ms on the
// 2-core machine, while a real Envoy opens its xDS streams within tens of milliseconds of its exec.
// That start dominated the bench's start -> ready for both agents alike, so the row measured the
// stand-in. This one does only what ready needs, as Envoy does it, with the few protobuf fields
// written and read by hand:
// - ADS on the bootstrap's `xds-grpc` pipe: the bootstrap's Node (id, cluster, metadata as a Struct)
//   in the first request, wildcard CDS and LDS, every response ACKed;
// - SDS on `sds-grpc`: one stream per secret (`default`, `ROOTCA`), each answer ACKed;
// - records in INTEROP_ENVOY_RECORD as the interop stand-in writes them, each with its time (`at`, ms since the epoch) ({"event":"start"},
//   {"event":"xds", typeUrl}, {"event":"sds", names}), so bench/podcost.ts's `ready` reads either.
// Exits on SIGTERM/SIGINT (the agents' death link sends SIGKILL, which needs nothing).

import { appendFileSync, mkdirSync, readFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { join, resolve } from "node:path";
import { encodeFields, lenField, messageField, parseFields, stringField, varintField, WIRE_FIXED64, type WireField } from "../src/lib/protowire.ts";

// --- protobuf wire (src/lib/protowire.ts), only the fields these messages use ---

/** A string field, left out when empty (proto3's default). */
const str = (no: number, s: string): WireField[] => (s === "" ? [] : [lenField(no, s)]);

/** google.protobuf.Value for a JSON value: null 1, number 2 (double), string 3, bool 4, struct 5, list 6. */
export function encodeValue(v: unknown): Uint8Array {
  if (v === null || v === undefined) return encodeFields([varintField(1, 0)]);
  if (typeof v === "number") {
    const d = new Uint8Array(8);
    new DataView(d.buffer).setFloat64(0, v, true);
    return encodeFields([{ no: 2, wire: WIRE_FIXED64, data: d }]);
  }
  if (typeof v === "string") return encodeFields([lenField(3, v)]);
  if (typeof v === "boolean") return encodeFields([varintField(4, v ? 1 : 0)]);
  if (Array.isArray(v)) return encodeFields([lenField(6, encodeFields(v.map((x) => lenField(1, encodeValue(x)))))]);
  return encodeFields([lenField(5, encodeStruct(v as Record<string, unknown>))]);
}

/** google.protobuf.Struct: map<string, Value> fields = 1. */
export function encodeStruct(o: Record<string, unknown>): Uint8Array {
  return encodeFields(Object.entries(o).map(([k, v]) => lenField(1, encodeFields([...str(1, k), lenField(2, encodeValue(v))]))));
}

export interface FastNode {
  id?: string;
  cluster?: string;
  metadata?: Record<string, unknown>;
}

/** envoy.config.core.v3.Node: id 1, cluster 2, metadata 3, user_agent_name 6. */
function encodeNode(n: FastNode): Uint8Array {
  return encodeFields([...str(1, n.id ?? ""), ...str(2, n.cluster ?? ""), lenField(3, encodeStruct(n.metadata ?? {})), lenField(6, "envoy")]);
}

/** envoy.service.discovery.v3.DiscoveryRequest: version_info 1, node 2, resource_names 3, type_url 4, response_nonce 5. */
export function encodeRequest(r: { typeUrl: string; names?: string[]; version?: string; nonce?: string; node?: FastNode }): Uint8Array {
  return encodeFields([
    ...str(1, r.version ?? ""),
    ...(r.node ? [lenField(2, encodeNode(r.node))] : []),
    ...(r.names ?? []).map((n) => lenField(3, n)),
    ...str(4, r.typeUrl),
    ...str(5, r.nonce ?? ""),
  ]);
}

/** DiscoveryResponse: version_info 1, resources 2 (Any: value 2), type_url 4, nonce 5; each resource's `name` (field 1, as Secret's). */
export function decodeResponse(b: Uint8Array): { version: string; typeUrl: string; nonce: string; names: string[] } {
  const f = parseFields(b);
  const names = f.flatMap((r) => {
    if (r.no !== 2) return [];
    const name = stringField(parseFields(messageField(parseFields(r.data), 2) ?? new Uint8Array(0)), 1);
    return name === undefined ? [] : [name];
  });
  return { version: stringField(f, 1) ?? "", typeUrl: stringField(f, 4) ?? "", nonce: stringField(f, 5) ?? "", names };
}

// --- the process ---

const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";
const SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/** `msg` with its 5-byte gRPC prefix. */
export function frame(msg: Uint8Array): Buffer {
  const f = Buffer.alloc(5 + msg.length);
  f.writeUInt32BE(msg.length, 1);
  f.set(msg, 5);
  return f;
}

/** One gRPC stream on a Unix socket: `first` requests sent at once, `onMessage` for each response, reopened 200 ms after it ends. */
function stream(socket: string, path: string, first: () => Uint8Array[], onMessage: (body: Uint8Array, send: (m: Uint8Array) => void) => void): void {
  const session = http2.connect("http://localhost", { createConnection: () => net.connect(socket) });
  session.on("error", () => {});
  const s = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
  const send = (m: Uint8Array) => {
    if (!s.closed && !s.destroyed) s.write(frame(m));
  };
  let buf: Buffer = Buffer.alloc(0);
  s.on("data", (c: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, c]) : c;
    while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
      const body = buf.subarray(5, 5 + buf.readUInt32BE(1));
      buf = buf.subarray(5 + body.length);
      onMessage(body, send);
    }
  });
  s.on("error", () => {});
  s.on("close", () => {
    session.close();
    setTimeout(() => stream(socket, path, first, onMessage), 200);
  });
  for (const m of first()) send(m);
}

interface Bootstrap {
  node?: FastNode;
  static_resources?: {
    clusters?: { name: string; load_assignment?: { endpoints?: { lb_endpoints?: { endpoint?: { address?: { pipe?: { path?: string } } } }[] }[] } }[];
  };
}

function pipeOf(b: Bootstrap, cluster: string): string | undefined {
  const c = b.static_resources?.clusters?.find((x) => x.name === cluster);
  return c?.load_assignment?.endpoints?.[0]?.lb_endpoints?.[0]?.endpoint?.address?.pipe?.path;
}

function main(): void {
  const argv = process.argv.slice(2);
  const recordFile = process.env.INTEROP_ENVOY_RECORD;
  const record = (r: Record<string, unknown>) => {
    if (recordFile) appendFileSync(recordFile, JSON.stringify({ ...r, pid: process.pid, at: Date.now() }) + "\n");
  };
  const bootstrapPath = argv[argv.indexOf("-c") + 1] ?? "";
  let b: Bootstrap = {};
  try {
    b = JSON.parse(readFileSync(bootstrapPath, "utf8")) as Bootstrap;
  } catch (e) {
    record({ event: "error", message: `cannot read bootstrap ${bootstrapPath}: ${(e as Error).message}` });
  }
  record({ event: "start", argv });
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => (record({ event: "signal", message: sig }), process.exit(0)));
  const node: FastNode = { id: b.node?.id, cluster: b.node?.cluster, metadata: b.node?.metadata };
  const ads = pipeOf(b, "xds-grpc");
  const sds = pipeOf(b, "sds-grpc");
  if (!ads || !sds) record({ event: "error", message: "the bootstrap has no xds-grpc or sds-grpc pipe" });
  if (ads)
    stream(
      resolve(ads),
      "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
      () => [encodeRequest({ typeUrl: CDS, node }), encodeRequest({ typeUrl: LDS })],
      (body, send) => {
        const r = decodeResponse(body);
        record({ event: "xds", typeUrl: r.typeUrl, names: r.names });
        send(encodeRequest({ typeUrl: r.typeUrl, version: r.version, nonce: r.nonce }));
      },
    );
  if (sds)
    for (const name of ["default", "ROOTCA"])
      stream(
        resolve(sds),
        "/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets",
        () => [encodeRequest({ typeUrl: SECRET, names: [name], node })],
        (body, send) => {
          const r = decodeResponse(body);
          record({ event: "sds", names: r.names });
          send(encodeRequest({ typeUrl: SECRET, names: [name], version: r.version, nonce: r.nonce }));
        },
      );
}

/** Compile this file into `dir/envoy` (bytecode, minified), the binary the agents exec as Envoy; returns its path. */
export function compileFastEnvoy(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const bin = join(dir, "envoy");
  const p = Bun.spawnSync([process.execPath, "build", "--compile", "--bytecode", "--minify", import.meta.path, "--outfile", bin], {
    stdout: "pipe",
    stderr: "pipe",
  });
  if (p.exitCode !== 0) throw new Error(`compiling the fast stand-in Envoy failed: ${p.stderr.toString()}`);
  return bin;
}

if (import.meta.main) main();
