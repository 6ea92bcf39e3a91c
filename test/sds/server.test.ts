// The SDS server through its Unix socket with a real gRPC client in Envoy's place: SotW
// sequences (first request, ACK, stale nonce, added names, NACK, unsubscribe), FetchSecrets,
// DeltaSecrets, pushes after rotation and file changes. Responses are also decoded with Envoy's
// own .proto files to check our minimal schema.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { PeerAuthorizer } from "../../src/lib/peerauth.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { pilotXdsMetrics } from "../../src/lib/pilot-xds-metrics.ts";
import { sdsCodec, SECRET_TYPE_URL } from "../../src/sds/proto.ts";
import { SdsServer, SDS_SERVICE } from "../../src/sds/server.ts";
import { until } from "./fake-clock.ts";
import { rig, type Rig } from "./helpers.ts";
import { ENVOY_API_INCLUDES } from "../support/envoy-protos.ts";

const codec = sdsCodec();
const pass = (b: Buffer) => b;
let r: Rig;
let server: SdsServer;
let socket: string;
let client: grpc.Client;

beforeAll(async () => {
  r = await rig();
  socket = join(r.dir, "uds", "socket");
  server = new SdsServer(
    { socketPath: socket, authorizer: new PeerAuthorizer("", process.getuid?.() ?? 0) },
    { log: r.log.log, secrets: r.cache, clock: r.clock },
  );
  await server.start();
  client = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
});
afterAll(async () => {
  client.close();
  await server.close();
  await r.close();
  rmSync(r.dir, { recursive: true, force: true });
});

type Res = ReturnType<typeof codec.decodeResponse>;

function sotw() {
  const call = client.makeBidiStreamRequest(`/${SDS_SERVICE}/StreamSecrets`, pass, pass);
  const got: Res[] = [];
  let status: grpc.StatusObject | undefined;
  call.on("data", (b: Buffer) => got.push(codec.decodeResponse(b)));
  call.on("status", (s) => (status = s));
  call.on("error", () => {});
  return {
    got,
    status: () => status,
    send: (names: string[], nonce = "", error?: string) =>
      call.write(
        codec.encodeRequest({
          typeUrl: SECRET_TYPE_URL,
          resourceNames: names,
          responseNonce: nonce,
          ...(error ? { errorDetail: { code: 13, message: error } } : {}),
        }),
      ),
    end: () => call.end(),
  };
}

describe("StreamSecrets (SotW, Istio semantics)", () => {
  test("first request, ACK, stale nonce, added names, NACK, unsubscribe", async () => {
    const s = sotw();
    s.send(["default"]);
    await until(() => s.got.length === 1, "first response");
    const first = s.got[0]!;
    expect(first.typeUrl).toBe(SECRET_TYPE_URL);
    expect(first.versionInfo).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\/\d+$/);
    expect(first.resources.map((x) => x.name)).toEqual(["default"]);
    const tls = first.resources[0]!;
    expect(tls.kind).toBe("tls");
    s.send(["default"], first.nonce); // ACK
    s.send(["default", "ROOTCA"], "stale-nonce"); // ignored
    // Sentinel: the next request is answered; an answer to the stale one would come before it
    // (and would make this one's nonce stale).
    s.send(["default", "ROOTCA"], first.nonce); // added ROOTCA only
    await until(() => s.got.length >= 2, "added-name response");
    expect(s.got[1]!.resources.map((x) => x.name)).toEqual(["ROOTCA"]);
    expect(s.got[1]!.resources[0]).toMatchObject({ kind: "root", trustedCa: r.ca.caRootPem });
    s.send(["default", "ROOTCA"], s.got[1]!.nonce, "bad cert"); // NACK: no answer
    s.send(["ROOTCA"], ""); // sentinel: an empty nonce is always answered, with just ROOTCA
    await until(() => s.got.length >= 3, "sentinel response after the NACK");
    expect(s.got[2]!.resources.map((x) => x.name)).toEqual(["ROOTCA"]);
    expect(r.log.lines.some((l) => l.includes("Envoy rejected") && l.includes("bad cert"))).toBe(true);

    const unsubscribedBefore = r.log.lines.filter((l) => l.includes("SDS: client unsubscribed")).length;
    s.send([], s.got[2]!.nonce); // unsubscribe
    await until(() => r.log.lines.filter((l) => l.includes("SDS: client unsubscribed")).length > unsubscribedBefore, "unsubscribe handled");
    // A second stream still watching ROOTCA sees the push; the push to the first stream (if any)
    // is queued in the same call, so an answer to a request sent afterwards would follow it.
    const watcher = sotw();
    watcher.send(["ROOTCA", "default"]);
    await until(() => watcher.got.length === 1, "watcher's first response");
    watcher.send(["ROOTCA", "default"], watcher.got[0]!.nonce);
    r.cache.updateTrustBundle([(await import("../../src/ca/local.ts").then((m) => m.LocalCa.generate())).rootPem]);
    // Both pushes (the new ROOTCA, and default re-issued for the new bundle) reached the watcher.
    const pushed = () => watcher.got.slice(1).flatMap((m) => m.resources.map((x) => x.name));
    await until(() => pushed().includes("ROOTCA") && pushed().includes("default"), "pushes to the stream still watching");
    s.send(["default"], ""); // sentinel
    await until(() => s.got.length >= 4, "sentinel response after the push");
    expect(s.got[3]!.resources.map((x) => x.name)).toEqual(["default"]); // unsubscribed: no push before it
    s.end();
    watcher.end();
  });

  test("pushes a new version to every watcher after rotation", async () => {
    const a = sotw();
    const b = sotw();
    a.send(["default"]);
    b.send(["default"]);
    await until(() => a.got.length === 1 && b.got.length === 1, "both first responses");
    a.send(["default"], a.got[0]!.nonce);
    b.send(["default"], b.got[0]!.nonce);
    r.clock.advance(r.clock.nextAt()! - r.clock.now());
    await until(() => a.got.length === 2 && b.got.length === 2, "rotation pushes");
    const oldChain = a.got[0]!.resources[0]! as { certificateChain: string };
    const newChain = a.got[1]!.resources[0]! as { certificateChain: string };
    expect(newChain.certificateChain).not.toBe(oldChain.certificateChain);
    expect(a.got[1]!.versionInfo).not.toBe(a.got[0]!.versionInfo);
    a.end();
    b.end();
  });

  test("an unknown resource name ends the stream with INVALID_ARGUMENT naming it", async () => {
    const s = sotw();
    s.send(["bogus"]);
    await until(() => s.status() !== undefined, "status");
    expect(s.status()!.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(s.status()!.details).toContain("bogus");
  });

  test("Envoy's own schema decodes our Secret", async () => {
    const s = sotw();
    s.send(["default"]);
    await until(() => s.got.length === 1, "response");
    const def = protoLoader.loadSync("envoy/extensions/transport_sockets/tls/v3/secret.proto", { includeDirs: ENVOY_API_INCLUDES });
    // Re-encode what we received with our codec and decode with proto-loader's descriptor-backed type.
    const raw = codec.encodeSecret(s.got[0]!.resources[0]!);
    const Secret = (grpc.loadPackageDefinition(def) as any).envoy.extensions.transport_sockets.tls.v3.Secret;
    const decoded = Secret.deserialize(Buffer.from(raw));
    expect(decoded.name).toBe("default");
    expect(Buffer.from(decoded.tlsCertificate.certificateChain.inlineBytes).toString()).toContain("BEGIN CERTIFICATE");
    expect(Buffer.from(decoded.tlsCertificate.privateKey.inlineBytes).toString()).toContain("PRIVATE KEY");
    s.end();
  });
});

describe("Istio's pilot_xds metrics on the SDS server", () => {
  test("istio_agent_pilot_xds_send_time, _expired_nonce{type=sds}, istio_agent_pilot_total_xds_rejects{type=sds}", async () => {
    const registry = newRegistry();
    const sock = join(r.dir, "uds-metrics", "socket");
    const own = new SdsServer(
      { socketPath: sock, authorizer: new PeerAuthorizer("", process.getuid?.() ?? 0) },
      { log: r.log.log, secrets: r.cache, clock: r.clock, xdsMetrics: pilotXdsMetrics(registry) },
    );
    await own.start();
    const c = new grpc.Client(`unix://${sock}`, grpc.credentials.createInsecure());
    try {
      const call = c.makeBidiStreamRequest(`/${SDS_SERVICE}/StreamSecrets`, pass, pass);
      const got: Res[] = [];
      call.on("data", (b: Buffer) => got.push(codec.decodeResponse(b)));
      call.on("error", () => {});
      const send = (names: string[], nonce = "", error?: string) =>
        call.write(
          codec.encodeRequest({
            typeUrl: SECRET_TYPE_URL,
            resourceNames: names,
            responseNonce: nonce,
            ...(error ? { errorDetail: { code: 13, message: error } } : {}),
          }),
        );
      send(["default"]);
      await until(() => got.length === 1, "first response");
      send(["default"], "stale-nonce");
      send(["default"], got[0]!.nonce, "bad cert");
      // Sentinel: a later added name is answered, so both earlier requests were handled.
      send(["default", "ROOTCA"], got[0]!.nonce);
      await until(() => got.length === 2, "added-name response");
      const text = await registry.metrics();
      expect(text).toContain('istio_agent_pilot_xds_expired_nonce{type="sds"} 1\n');
      expect(text).toContain('istio_agent_pilot_total_xds_rejects{type="sds"} 1\n');
      expect(text).toContain("istio_agent_pilot_xds_send_time_count 2\n");
      call.end();
    } finally {
      c.close();
      await own.close();
    }
  });
});

describe("FetchSecrets and DeltaSecrets (beyond Istio)", () => {
  test("FetchSecrets answers the requested names", async () => {
    const res = await new Promise<Res>((resolve, reject) =>
      client.makeUnaryRequest(
        `/${SDS_SERVICE}/FetchSecrets`,
        pass,
        pass,
        codec.encodeRequest({ resourceNames: ["default", "ROOTCA"], typeUrl: SECRET_TYPE_URL }),
        (err, b) => (err ? reject(err) : resolve(codec.decodeResponse(b!))),
      ),
    );
    expect(res.resources.map((x) => x.name)).toEqual(["default", "ROOTCA"]);
  });

  test("DeltaSecrets: subscribe, initial versions, unsubscribe, unknown names removed, pushes", async () => {
    const call = client.makeBidiStreamRequest(`/${SDS_SERVICE}/DeltaSecrets`, pass, pass);
    const got: ReturnType<typeof codec.decodeDeltaResponse>[] = [];
    call.on("data", (b: Buffer) => got.push(codec.decodeDeltaResponse(b)));
    call.on("error", () => {});
    const rootVersion = (await r.cache.get("ROOTCA")).version;
    call.write(
      codec.encodeDeltaRequest({
        typeUrl: SECRET_TYPE_URL,
        resourceNamesSubscribe: ["default", "ROOTCA", "nope"],
        initialResourceVersions: { ROOTCA: rootVersion },
      }),
    );
    await until(() => got.length === 1, "delta response");
    expect(got[0]!.resources.map((x) => x.name)).toEqual(["default"]); // ROOTCA already current
    expect(got[0]!.removed).toEqual(["nope"]);
    call.write(codec.encodeDeltaRequest({ typeUrl: SECRET_TYPE_URL, responseNonce: got[0]!.nonce }));
    r.clock.advance(r.clock.nextAt()! - r.clock.now());
    await until(() => got.length === 2, "delta push after rotation");
    expect(got[1]!.resources.map((x) => x.name)).toEqual(["default"]);
    expect(got[1]!.resources[0]!.version).not.toBe(got[0]!.resources[0]!.version);
    // Unsubscribe; a name that does not exist in the same request is answered with "removed",
    // which shows the request was handled.
    call.write(
      codec.encodeDeltaRequest({
        typeUrl: SECRET_TYPE_URL,
        resourceNamesUnsubscribe: ["default"],
        resourceNamesSubscribe: ["nope-1"],
        responseNonce: got[1]!.nonce,
      }),
    );
    await until(() => got.length === 3, "removal of nope-1");
    expect(got[2]!.removed).toEqual(["nope-1"]);
    // A second stream still subscribed sees the next rotation; a push to the first stream would
    // be queued in the same call, before the answer to a request sent afterwards.
    const other = client.makeBidiStreamRequest(`/${SDS_SERVICE}/DeltaSecrets`, pass, pass);
    const otherGot: ReturnType<typeof codec.decodeDeltaResponse>[] = [];
    other.on("data", (b: Buffer) => otherGot.push(codec.decodeDeltaResponse(b)));
    other.on("error", () => {});
    other.write(codec.encodeDeltaRequest({ typeUrl: SECRET_TYPE_URL, resourceNamesSubscribe: ["default"] }));
    await until(() => otherGot.length === 1, "second stream's first response");
    r.clock.advance(r.clock.nextAt()! - r.clock.now());
    await until(() => otherGot.length === 2, "rotation push to the second stream");
    call.write(codec.encodeDeltaRequest({ typeUrl: SECRET_TYPE_URL, resourceNamesSubscribe: ["nope-2"] }));
    await until(() => got.length >= 4, "removal of nope-2");
    expect(got[3]!.removed).toEqual(["nope-2"]); // no push of "default" before it
    expect(got[3]!.resources).toEqual([]);
    call.end();
    other.end();
  });
});

describe("peer credentials", () => {
  test("a UID outside XDS_AUTHORIZED_UIDS is refused before gRPC", async () => {
    const path = join(r.dir, "uds2", "socket");
    const s2 = new SdsServer({ socketPath: path, authorizer: new PeerAuthorizer("4242", 0) }, { log: r.log.log, secrets: r.cache, clock: r.clock });
    await s2.start();
    const c2 = new grpc.Client(`unix://${path}`, grpc.credentials.createInsecure());
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      c2.makeUnaryRequest(
        `/${SDS_SERVICE}/FetchSecrets`,
        pass,
        pass,
        codec.encodeRequest({ resourceNames: ["ROOTCA"] }),
        { deadline: Date.now() + 3000 },
        (e) => resolve(e),
      ),
    );
    expect(err?.code).toBeOneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]);
    expect(r.log.lines.some((l) => l.includes("refused connection") && l.includes("not in authorized UIDs"))).toBe(true);
    c2.close();
    await s2.close();
  });
});
