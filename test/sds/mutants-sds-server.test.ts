// The SDS service on the agent's gRPC server (src/sds/server.ts), measured by mutation (area
// sds-server): the version stamp, one handler per stream and its life (streamCount), pushes to the
// streams watching a name, close(), statuses for failed and invalid secrets on StreamSecrets and
// FetchSecrets, the log lines (listening, refused peers, malformed requests) and the listen error.
// Clients are grpc-js and a raw HTTP/2 peer (test/xds/h2-support.ts), independent of the server;
// requests and responses are encoded and decoded with Envoy's own .proto files through
// protobufjs (test/support/envoy-protos.ts), so the tests hold whatever codec the server uses.

import { afterEach, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PeerAuthorizer } from "../../src/lib/peerauth.ts";
import { LogSink, memoryLogger } from "../../src/lib/log.ts";
import { SdsError } from "../../src/sds/errors.ts";
import type { SecretItem } from "../../src/sds/item.ts";
import { SdsServer, type SdsServerOptions } from "../../src/sds/server.ts";
import { FakeClock, until } from "./fake-clock.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

// Envoy's service name, as a literal (not the server's constant).
const SDS_SERVICE = "envoy.service.secret.v3.SecretDiscoveryService";
const SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
const ROOT_PEM = `-----BEGIN CERTIFICATE-----\n${"QUJD".repeat(20)}\n-----END CERTIFICATE-----\n`;
const pass = (b: Buffer) => b;

/** A secret source: roots at once (version from a counter the test bumps), failures on `file-root:/fail*`, never for `file-root:/hang*`. */
class FakeSecrets {
  readonly listeners: ((name: string) => void)[] = [];
  readonly asked: string[] = [];
  readonly signals: { name: string; signal: AbortSignal }[] = [];
  unsubscribed = 0;
  generation = 1;
  get(name: string, signal?: AbortSignal): Promise<SecretItem> {
    this.asked.push(name);
    if (signal) this.signals.push({ name, signal });
    if (name.startsWith("file-root:/hang")) return new Promise<SecretItem>(() => {});
    if (name.startsWith("file-root:/fail")) return Promise.reject(new Error(`the CA is down for ${name}`));
    if (name.startsWith("bogus")) return Promise.reject(new SdsError(`${name}: not a resource name`, name));
    return Promise.resolve({ resourceName: name, rootCert: ROOT_PEM, createdMs: 0, expireMs: 0, version: `v${this.generation}` });
  }
  crlFor(): string | undefined {
    return undefined;
  }
  onUpdate(fn: (name: string) => void): () => void {
    this.listeners.push(fn);
    return () => {
      this.unsubscribed++;
      this.listeners.splice(this.listeners.indexOf(fn), 1);
    };
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

// 2026-11-21T10:20:30.456Z: the version stamp drops the milliseconds.
const T0 = Date.parse("2026-11-21T10:20:30.456Z");

async function setup(opts: Partial<SdsServerOptions> = {}, start = true, json = false) {
  const dir = mkdtempSync(join(tmpdir(), "sds-mut-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const socket = join(dir, "uds", "socket");
  const secrets = new FakeSecrets();
  const log = memoryLogger();
  const jsonLines: string[] = [];
  if (json) log.log = new LogSink({ outputLevels: "all:debug", json: true, write: (l) => jsonLines.push(l) }).logger();
  const clock = new FakeClock(T0);
  const server = new SdsServer({ socketPath: socket, authorizer: new PeerAuthorizer("", process.getuid?.() ?? 0), ...opts }, { log: log.log, secrets, clock });
  cleanups.push(() => server.close());
  if (start) await server.start();
  const client = () => {
    const c = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
    cleanups.push(() => c.close());
    return c;
  };
  return { dir, socket, secrets, log, jsonLines, clock, server, client };
}

const envoyType = (name: string) => envoyProtoRoot().lookupType(name);
const DiscoveryRequest = envoyType("envoy.service.discovery.v3.DiscoveryRequest");
const DiscoveryResponse = envoyType("envoy.service.discovery.v3.DiscoveryResponse");
const DeltaRequest = envoyType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
const DeltaResponse = envoyType("envoy.service.discovery.v3.DeltaDiscoveryResponse");

interface Res {
  versionInfo: string;
  nonce: string;
  names: string[];
}
function decodeSotw(b: Buffer): Res {
  const m = DiscoveryResponse.toObject(DiscoveryResponse.decode(b), { defaults: true }) as {
    version_info: string;
    nonce: string;
    resources: { value: Uint8Array }[];
  };
  const Secret = envoyType("envoy.extensions.transport_sockets.tls.v3.Secret");
  return { versionInfo: m.version_info, nonce: m.nonce, names: m.resources.map((r) => (Secret.decode(r.value) as unknown as { name: string }).name) };
}
const sotwRequest = (names: string[], nonce = "") =>
  Buffer.from(DiscoveryRequest.encode({ type_url: SECRET, resource_names: names, response_nonce: nonce }).finish());

function stream(c: grpc.Client, method = "StreamSecrets") {
  const call = c.makeBidiStreamRequest(`/${SDS_SERVICE}/${method}`, pass, pass);
  const got: Buffer[] = [];
  let status: grpc.StatusObject | undefined;
  call.on("data", (b: Buffer) => got.push(b));
  call.on("status", (s) => (status = s));
  call.on("error", () => {});
  return { call, got, status: () => status, ended: () => until(() => status !== undefined, `${method}'s status`) };
}

function fetch(c: grpc.Client, names: string[] | Buffer): Promise<{ err: grpc.ServiceError | null; res?: Res; status: grpc.StatusObject }> {
  return new Promise((resolve) => {
    let done: { err: grpc.ServiceError | null; res?: Res } | undefined;
    let status: grpc.StatusObject | undefined;
    const finish = () => done && status && resolve({ ...done, status });
    const call = c.makeUnaryRequest(`/${SDS_SERVICE}/FetchSecrets`, pass, pass, Buffer.isBuffer(names) ? names : sotwRequest(names), (err, res) => {
      done = { err, ...(res ? { res: decodeSotw(res) } : {}) };
      finish();
    });
    call.on("status", (st) => {
      status = st;
      finish();
    });
  });
}

/** A DiscoveryRequest of exactly `size` bytes: names, then version_info padding (Envoy's encoding). */
function paddedRequest(names: string[], size: number, nonce = ""): Buffer {
  const base = sotwRequest(names, nonce);
  // version_info (field 1) of L bytes costs 1 (tag) + the varint length of L + L.
  for (let lenBytes = 1; lenBytes <= 5; lenBytes++) {
    const pad = size - base.length - 1 - lenBytes;
    if (pad < 0 || Math.max(1, Math.ceil(Math.log2(pad + 1) / 7)) !== lenBytes) continue;
    const b = Buffer.from(DiscoveryRequest.encode({ version_info: "x".repeat(pad), type_url: SECRET, resource_names: names, response_nonce: nonce }).finish());
    expect(b.length).toBe(size);
    return b;
  }
  throw new Error(`cannot pad a request to ${size} bytes`);
}

const lineOf = (log: ReturnType<typeof memoryLogger>, text: string) => log.lines.map((l) => l.split("\t").slice(1).join("\t")).find((l) => l.includes(text));

describe("sds-server: versions, streams, pushes", () => {
  test("versions are the clock's time to the second and a counter shared by every stream and FetchSecrets", async () => {
    const s = await setup();
    const c = s.client();
    const a = stream(c);
    a.call.write(sotwRequest(["ROOTCA"]));
    await until(() => a.got.length === 1, "a's answer");
    expect(decodeSotw(a.got[0]!).versionInfo).toBe("2026-11-21T10:20:30Z/1");
    s.clock.advance(61_001);
    const b = stream(c);
    b.call.write(sotwRequest(["file-root:/x"]));
    await until(() => b.got.length === 1, "b's answer");
    expect(decodeSotw(b.got[0]!).versionInfo).toBe("2026-11-21T10:21:31Z/2");
    const f = await fetch(c, ["ROOTCA"]);
    expect(f.err).toBeNull();
    expect(f.res!.versionInfo).toBe("2026-11-21T10:21:31Z/3");
    expect(f.res!.nonce).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(f.res!.names).toEqual(["ROOTCA"]);
  });

  test("one handler per stream, made by its first request and forgotten at its end (half-close OK, cancel, failure)", async () => {
    const s = await setup();
    const c = s.client();
    const idle = stream(c);
    const a = stream(c);
    a.call.write(sotwRequest(["ROOTCA"]));
    await until(() => a.got.length === 1, "a's answer");
    expect(s.server.streamCount()).toBe(1); // the idle stream has sent nothing yet
    const first = decodeSotw(a.got[0]!);
    a.call.write(sotwRequest(["ROOTCA"], first.nonce)); // ACK: no answer
    a.call.write(sotwRequest(["ROOTCA", "file-root:/y"], first.nonce));
    await until(() => a.got.length === 2, "a's answer to the added name");
    expect(s.server.streamCount()).toBe(1);
    const d = stream(c, "DeltaSecrets");
    d.call.write(Buffer.from(DeltaRequest.encode({ type_url: SECRET, resource_names_subscribe: ["ROOTCA"] }).finish()));
    await until(() => d.got.length === 1, "the delta answer");
    expect((DeltaResponse.toObject(DeltaResponse.decode(d.got[0]!)) as { resources: { name: string }[] }).resources.map((r) => r.name)).toEqual(["ROOTCA"]);
    expect(s.server.streamCount()).toBe(2);
    a.call.end();
    await a.ended();
    expect(a.status()).toMatchObject({ code: grpc.status.OK, details: "" });
    await until(() => s.server.streamCount() === 1, "a forgotten");
    d.call.cancel();
    await until(() => s.server.streamCount() === 0, "d forgotten");
    const bad = stream(c);
    bad.call.write(sotwRequest(["file-root:/fail-1"]));
    await bad.ended();
    expect(s.server.streamCount()).toBe(0);
    idle.call.end();
    await idle.ended();
    expect(idle.status()).toMatchObject({ code: grpc.status.OK, details: "" });
    expect(idle.got).toEqual([]);
  });

  test("a change is pushed to every stream watching the name; close() unsubscribes and forgets every stream", async () => {
    const s = await setup();
    const c = s.client();
    const watchers = [stream(c), stream(c)];
    const other = stream(c);
    for (const w of watchers) w.call.write(sotwRequest(["ROOTCA"]));
    other.call.write(sotwRequest(["file-root:/other"]));
    await until(() => watchers.every((w) => w.got.length === 1) && other.got.length === 1, "the first answers");
    expect(s.secrets.listeners).toHaveLength(1);
    s.secrets.generation = 2;
    s.secrets.listeners[0]!("ROOTCA");
    await until(() => watchers.every((w) => w.got.length === 2), "the pushes");
    expect(watchers.map((w) => decodeSotw(w.got[1]!).names)).toEqual([["ROOTCA"], ["ROOTCA"]]);
    expect(other.got).toHaveLength(1);
    expect(s.server.streamCount()).toBe(3);
    await s.server.close();
    expect(s.secrets.unsubscribed).toBe(1);
    expect(s.secrets.listeners).toHaveLength(0);
    expect(s.server.streamCount()).toBe(0);
  });
});

describe("sds-server: statuses", () => {
  test("a secret that cannot be had ends the stream UNAVAILABLE with its error; an invalid name INVALID_ARGUMENT", async () => {
    const s = await setup();
    const c = s.client();
    const down = stream(c);
    down.call.write(sotwRequest(["file-root:/fail-2"]));
    await down.ended();
    expect(down.status()).toMatchObject({ code: grpc.status.UNAVAILABLE, details: "the CA is down for file-root:/fail-2" });
    const invalid = stream(c);
    invalid.call.write(sotwRequest(["bogus:x"]));
    await invalid.ended();
    expect(invalid.status()).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: "bogus:x: not a resource name" });
  });

  test("FetchSecrets: each name once; none is INVALID_ARGUMENT; a failure UNAVAILABLE, an invalid name INVALID_ARGUMENT", async () => {
    const s = await setup();
    const c = s.client();
    const twice = await fetch(c, ["ROOTCA", "file-root:/z", "ROOTCA"]);
    expect(twice.res?.names).toEqual(["ROOTCA", "file-root:/z"]);
    const none = await fetch(c, []);
    expect(none.err).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: "FetchSecrets: no resource_names" });
    const down = await fetch(c, ["file-root:/fail-3"]);
    expect(down.err).toMatchObject({ code: grpc.status.UNAVAILABLE, details: "the CA is down for file-root:/fail-3" });
    const invalid = await fetch(c, ["bogus:y"]);
    expect(invalid.err).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: "bogus:y: not a resource name" });
  });

  test("a malformed request: INVALID_ARGUMENT, and a warning line; the server goes on serving", async () => {
    const s = await setup();
    const c = s.client();
    const b = stream(c);
    b.call.write(Buffer.from([0x1a, 0x7f, 0x41])); // a string field claiming 127 bytes, 1 present
    await b.ended();
    expect(b.status()?.code).toBe(grpc.status.INVALID_ARGUMENT);
    const detail = b.status()!.details.slice("malformed discovery request: ".length);
    expect(b.status()!.details).toBe(`malformed discovery request: ${detail}`);
    expect(detail.length).toBeGreaterThan(0);
    expect(lineOf(s.log, "malformed request")).toStartWith(`warn\tSDS: malformed request: ${detail}`);
    expect(s.server.streamCount()).toBe(0);
    const ok = stream(c);
    ok.call.write(sotwRequest(["ROOTCA"]));
    await until(() => ok.got.length === 1, "an answer after the malformed one");
  });
});

describe("sds-server: listening", () => {
  test("start logs the socket; a refused peer is logged with its pid and uid", async () => {
    const s = await setup({ authorizer: new PeerAuthorizer("4242", 0) });
    expect(lineOf(s.log, "listening")).toStartWith(`info\tSDS server listening on ${s.socket}`);
    const c = s.client();
    const f = await new Promise<grpc.ServiceError | null>((resolve) =>
      c.makeUnaryRequest(`/${SDS_SERVICE}/FetchSecrets`, pass, pass, sotwRequest(["ROOTCA"]), { deadline: Date.now() + 3000 }, (e) => resolve(e)),
    );
    expect(f?.code).toBeOneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]);
    const uid = process.getuid?.() ?? 0;
    const line = lineOf(s.log, "refused connection")!;
    expect(line).toStartWith(`warn\tSDS: refused connection on ${s.socket}: uid ${uid} not in authorized UIDs [4242]`);
    expect(line).toContain(`\tpid=${process.pid}`);
    expect(line).toContain(`\tuid=${uid}`);
  });

  test("a socket that cannot be bound: an SdsError naming the path", async () => {
    const s = await setup({}, false);
    const blocker = join(s.dir, "file");
    writeFileSync(blocker, "");
    const server = new SdsServer(
      { socketPath: join(blocker, "socket"), authorizer: new PeerAuthorizer("", 0) },
      { log: s.log.log, secrets: s.secrets, clock: s.clock },
    );
    const err = await server.start().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(SdsError);
    expect(err!.message).toStartWith(`SDS: cannot listen on ${join(blocker, "socket")}: `);
    expect(err!.cause).toBeInstanceOf(Error);
    expect(s.secrets.listeners).toHaveLength(0);
  });
});

describe("sds-server: limits, flow control, FetchSecrets edges", () => {
  test("the default receive limit is gRPC's 4 MiB, on StreamSecrets and FetchSecrets", async () => {
    const s = await setup();
    const c = s.client();
    const over = stream(c);
    over.call.write(paddedRequest(["ROOTCA"], 4 * 1024 * 1024 + 1));
    await over.ended();
    expect(over.status()).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED, details: "Received message larger than max (4194305 vs 4194304)" });
    const f = await fetch(c, paddedRequest(["ROOTCA"], 4 * 1024 * 1024 + 1));
    expect(f.err).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED, details: "Received message larger than max (4194305 vs 4194304)" });
  });

  test("a client that reads its answers keeps its window: 200 KiB of requests after an answer are all served", async () => {
    const s = await setup();
    const a = stream(s.client());
    a.call.write(sotwRequest(["ROOTCA"]));
    await until(() => a.got.length === 1, "the first answer");
    const nonce = decodeSotw(a.got[0]!).nonce;
    for (let i = 0; i < 200; i++) a.call.write(paddedRequest(["ROOTCA"], 1024, nonce)); // ACKs: no answers
    a.call.write(sotwRequest(["ROOTCA", "file-root:/last"], nonce));
    await until(() => a.got.length === 2, "the answer to the request after 200 KiB", 5000);
    expect(decodeSotw(a.got[1]!).names).toEqual(["file-root:/last"]);
  });

  test("FetchSecrets: OK with no message; a refused call never asks for its secrets; a caller gone aborts with a reason", async () => {
    const s = await setup();
    const c = s.client();
    const ok = await fetch(c, ["ROOTCA"]);
    expect(ok.status).toMatchObject({ code: grpc.status.OK, details: "" });
    const two = c.makeClientStreamRequest(`/${SDS_SERVICE}/FetchSecrets`, pass, pass, () => {});
    two.on("error", () => {});
    const twoStatus = new Promise<grpc.StatusObject>((resolve) => two.on("status", resolve));
    two.write(sotwRequest(["file-root:/refused"]));
    two.write(sotwRequest(["file-root:/refused"]));
    two.write(sotwRequest(["file-root:/refused"]));
    two.end();
    expect((await twoStatus).code).toBe(grpc.status.UNIMPLEMENTED);
    // Sentinel: a later call on the same connection is answered after the refused call's end was read.
    expect((await fetch(c, ["file-root:/after"])).res?.names).toEqual(["file-root:/after"]);
    expect(s.secrets.asked).not.toContain("file-root:/refused");
    const hang = c.makeUnaryRequest(`/${SDS_SERVICE}/FetchSecrets`, pass, pass, sotwRequest(["file-root:/hang-fetch"]), () => {});
    await until(() => s.secrets.signals.some((x) => x.name === "file-root:/hang-fetch"), "the secret asked for");
    hang.cancel();
    const sig = s.secrets.signals.find((x) => x.name === "file-root:/hang-fetch")!.signal;
    await until(() => sig.aborted, "the abort");
    expect((sig.reason as Error).message).toBe("FetchSecrets: the caller went away");
  });
});

describe("sds-server: lifecycle details", () => {
  test("prepare() loads the schema and resolves; close() before start is a no-op", async () => {
    const s = await setup({}, false);
    const p = s.server.prepare();
    expect(p).toBeInstanceOf(Promise);
    expect(await p).toBeUndefined();
    await s.server.close();
    expect(s.secrets.unsubscribed).toBe(0);
  });

  test("under --log_as_json the listening line carries the path; a malformed request's line its connection id", async () => {
    const s = await setup({}, true, true);
    const listening = s.jsonLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((j) => String(j.msg).startsWith("SDS server listening"));
    expect(listening?.path).toBe(s.socket);
    const b = stream(s.client());
    b.call.write(Buffer.from([0x1a, 0x7f, 0x41]));
    await b.ended();
    const warn = s.jsonLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((j) => String(j.msg).startsWith("SDS: malformed request"));
    expect(String(warn?.conn)).toMatch(/^[0-9a-f]{8}$/);
  });
});
