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
import { memoryLogger } from "../../src/lib/log.ts";
import { SdsError } from "../../src/sds/errors.ts";
import type { SecretItem } from "../../src/sds/item.ts";
import { SdsServer, SDS_SERVICE, type SdsServerOptions } from "../../src/sds/server.ts";
import { FakeClock, until } from "./fake-clock.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

const SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
const ROOT_PEM = `-----BEGIN CERTIFICATE-----\n${"QUJD".repeat(20)}\n-----END CERTIFICATE-----\n`;
const pass = (b: Buffer) => b;

/** A secret source: roots at once (version from a counter the test bumps), failures on `file-root:/fail*`, never for `file-root:/hang*`. */
class FakeSecrets {
  readonly listeners: ((name: string) => void)[] = [];
  unsubscribed = 0;
  generation = 1;
  get(name: string): Promise<SecretItem> {
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

async function setup(opts: Partial<SdsServerOptions> = {}, start = true) {
  const dir = mkdtempSync(join(tmpdir(), "sds-mut-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const socket = join(dir, "uds", "socket");
  const secrets = new FakeSecrets();
  const log = memoryLogger();
  const clock = new FakeClock(T0);
  const server = new SdsServer({ socketPath: socket, authorizer: new PeerAuthorizer("", process.getuid?.() ?? 0), ...opts }, { log: log.log, secrets, clock });
  cleanups.push(() => server.close());
  if (start) await server.start();
  const client = () => {
    const c = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
    cleanups.push(() => c.close());
    return c;
  };
  return { dir, socket, secrets, log, clock, server, client };
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

function fetch(c: grpc.Client, names: string[]): Promise<{ err: grpc.ServiceError | null; res?: Res }> {
  return new Promise((resolve) =>
    c.makeUnaryRequest(`/${SDS_SERVICE}/FetchSecrets`, pass, pass, sotwRequest(names), (err, res) =>
      resolve({ err, ...(res ? { res: decodeSotw(res) } : {}) }),
    ),
  );
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
    expect(s.secrets.listeners).toHaveLength(0);
  });
});
