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

// --- protobuf wire, only what these messages use ---

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function bytesField(field: number, body: Uint8Array): number[] {
  return [...varint((field << 3) | 2), ...varint(body.length), ...body];
}

const text = new TextEncoder();
function stringField(field: number, s: string): number[] {
  return s === "" ? [] : bytesField(field, text.encode(s));
}

/** google.protobuf.Value for a JSON value. */
export function encodeValue(v: unknown): Uint8Array {
  if (v === null || v === undefined) return new Uint8Array([(1 << 3) | 0, 0]);
  if (typeof v === "number") {
    const b = new Uint8Array(9);
    b[0] = (2 << 3) | 1;
    new DataView(b.buffer).setFloat64(1, v, true);
    return b;
  }
  if (typeof v === "string") return new Uint8Array(bytesField(3, text.encode(v)));
  if (typeof v === "boolean") return new Uint8Array([(4 << 3) | 0, v ? 1 : 0]);
  if (Array.isArray(v)) return new Uint8Array(bytesField(6, new Uint8Array(v.flatMap((x) => bytesField(1, encodeValue(x))))));
  return new Uint8Array(bytesField(5, encodeStruct(v as Record<string, unknown>)));
}

/** google.protobuf.Struct: map<string, Value> fields = 1. */
export function encodeStruct(o: Record<string, unknown>): Uint8Array {
  return new Uint8Array(Object.entries(o).flatMap(([k, v]) => bytesField(1, new Uint8Array([...stringField(1, k), ...bytesField(2, encodeValue(v))]))));
}

export interface FastNode {
  id?: string;
  cluster?: string;
  metadata?: Record<string, unknown>;
}

/** envoy.config.core.v3.Node: id 1, cluster 2, metadata 3, user_agent_name 6. */
function encodeNode(n: FastNode): Uint8Array {
  return new Uint8Array([
    ...stringField(1, n.id ?? ""),
    ...stringField(2, n.cluster ?? ""),
    ...bytesField(3, encodeStruct(n.metadata ?? {})),
    ...stringField(6, "envoy"),
  ]);
}

/** envoy.service.discovery.v3.DiscoveryRequest: version_info 1, node 2, resource_names 3, type_url 4, response_nonce 5. */
export function encodeRequest(r: { typeUrl: string; names?: string[]; version?: string; nonce?: string; node?: FastNode }): Uint8Array {
  return new Uint8Array([
    ...stringField(1, r.version ?? ""),
    ...(r.node ? bytesField(2, encodeNode(r.node)) : []),
    ...(r.names ?? []).flatMap((n) => bytesField(3, text.encode(n))),
    ...stringField(4, r.typeUrl),
    ...stringField(5, r.nonce ?? ""),
  ]);
}

/** Each field of a message as (field number, wire type, bytes of a length-delimited value). */
function* fields(b: Uint8Array): Generator<[number, number, Uint8Array]> {
  let i = 0;
  const read = (): number => {
    let n = 0;
    let mul = 1;
    for (;;) {
      if (i >= b.length) throw new Error("truncated varint");
      const x = b[i++]!;
      n += (x & 0x7f) * mul;
      if (x < 0x80) return n;
      mul *= 128;
    }
  };
  while (i < b.length) {
    const key = read();
    const wire = key & 7;
    if (wire === 0) read();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = read();
      if (i + len > b.length) throw new Error("truncated field");
      yield [key >>> 3, 2, b.subarray(i, i + len)];
      i += len;
      continue;
    } else throw new Error(`wire type ${wire}`);
    yield [key >>> 3, wire, new Uint8Array(0)];
  }
}

const textOf = new TextDecoder();

/** DiscoveryResponse: version_info 1, resources 2 (Any: value 2), type_url 4, nonce 5; each resource's `name` (field 1, as Secret's). */
export function decodeResponse(b: Uint8Array): { version: string; typeUrl: string; nonce: string; names: string[] } {
  const r = { version: "", typeUrl: "", nonce: "", names: [] as string[] };
  for (const [f, , v] of fields(b)) {
    if (f === 1) r.version = textOf.decode(v);
    else if (f === 4) r.typeUrl = textOf.decode(v);
    else if (f === 5) r.nonce = textOf.decode(v);
    else if (f === 2) for (const [af, , av] of fields(v)) if (af === 2) for (const [rf, , rv] of fields(av)) if (rf === 1) r.names.push(textOf.decode(rv));
  }
  return r;
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
