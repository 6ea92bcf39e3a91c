// The SDS server with its wire codec, end to end over its socket (a grpc-js client plays Envoy,
// requests encoded by protobufjs from Envoy's own protos): a request with a full node and fields
// the server does not know is answered on every method; a malformed one ends the stream
// INVALID_ARGUMENT with a status naming the message, the field and what is wrong with it.
import { afterEach, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PeerAuthorizer } from "../../src/lib/peerauth.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { sdsCodec, SECRET_TYPE_URL } from "../../src/sds/proto.ts";
import { SdsServer, SDS_SERVICE } from "../../src/sds/server.ts";
import type { SecretItem } from "../../src/sds/item.ts";
import { FakeClock, until } from "./fake-clock.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

const codec = sdsCodec();
const envoy = envoyProtoRoot();
const Req = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
const DReq = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
const NODE = { id: "sidecar~10.1.2.3~app.default~default.svc.cluster.local", metadata: { fields: { ISTIO_VERSION: { string_value: "1.24.0" } } } };
// Fields no request defines: varint 10, length-delimited 100.
const UNKNOWN = Buffer.from([0x50, 0x01, 0xa2, 0x06, 0x02, 0x68, 0x69]);
const pass = (b: Buffer) => b;

const secrets = {
  get: (name: string): Promise<SecretItem> => Promise.resolve({ resourceName: name, rootCert: "ROOT-PEM", createdMs: 0, expireMs: 0, version: "v1" }),
  crlFor: (): string | undefined => undefined,
  onUpdate: () => () => {},
};

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function client(): Promise<grpc.Client> {
  const dir = mkdtempSync(join(tmpdir(), "sds-wire-"));
  const socket = join(dir, "socket");
  const server = new SdsServer(
    { socketPath: socket, authorizer: new PeerAuthorizer("", process.getuid?.() ?? 0) },
    { log: memoryLogger().log, secrets, clock: new FakeClock() },
  );
  await server.start();
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => server.close());
  const c = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
  cleanups.push(() => c.close());
  return c;
}

function bidi(c: grpc.Client, method: string) {
  const call = c.makeBidiStreamRequest(`/${SDS_SERVICE}/${method}`, pass, pass);
  const got: Buffer[] = [];
  call.on("data", (b: Buffer) => got.push(b));
  call.on("error", () => {});
  const status = new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve));
  return { call, got, status };
}

test("StreamSecrets, DeltaSecrets and FetchSecrets answer requests carrying Envoy's node and unknown fields", async () => {
  const c = await client();
  const s = bidi(c, "StreamSecrets");
  s.call.write(Buffer.concat([Req.encode(Req.fromObject({ node: NODE, type_url: SECRET_TYPE_URL, resource_names: ["ROOTCA"] })).finish(), UNKNOWN]));
  await until(() => s.got.length === 1, "the SotW answer");
  expect(codec.decodeResponse(s.got[0]!).resources).toEqual([{ name: "ROOTCA", kind: "root", trustedCa: "ROOT-PEM" }]);

  const d = bidi(c, "DeltaSecrets");
  d.call.write(
    Buffer.concat([UNKNOWN, DReq.encode(DReq.fromObject({ node: NODE, type_url: SECRET_TYPE_URL, resource_names_subscribe: ["ROOTCA"] })).finish()]),
  );
  await until(() => d.got.length === 1, "the Delta answer");
  expect(codec.decodeDeltaResponse(d.got[0]!).resources.map((r) => [r.name, r.version])).toEqual([["ROOTCA", "v1"]]);

  const fetched = await new Promise<Buffer>((resolve, reject) =>
    c.makeUnaryRequest(
      `/${SDS_SERVICE}/FetchSecrets`,
      pass,
      pass,
      Buffer.concat([Req.encode(Req.fromObject({ node: NODE, resource_names: ["ROOTCA"] })).finish(), UNKNOWN]),
      (e, r) => (e ? reject(e) : resolve(r!)),
    ),
  );
  expect(codec.decodeResponse(fetched).resources.map((r) => r.name)).toEqual(["ROOTCA"]);
  s.call.end();
  d.call.end();
});

test("a malformed request's status names the message and field: StreamSecrets, DeltaSecrets, FetchSecrets", async () => {
  const c = await client();
  const s = bidi(c, "StreamSecrets");
  s.call.write(Buffer.from([0x18, 0x01]));
  expect(await s.status).toMatchObject({
    code: grpc.status.INVALID_ARGUMENT,
    details: "malformed discovery request: DiscoveryRequest.resource_names has wire type 0, want length-delimited (2)",
  });
  expect(s.got).toEqual([]);

  const d = bidi(c, "DeltaSecrets");
  d.call.write(Buffer.from([0x2a, 0x02, 0x0a, 0x05]));
  expect(await d.status).toMatchObject({
    code: grpc.status.INVALID_ARGUMENT,
    details: "malformed discovery request: DeltaDiscoveryRequest.initial_resource_versions: field 1 runs past the end of the message at byte 0",
  });

  const err = await new Promise<grpc.ServiceError | null>((resolve) =>
    c.makeUnaryRequest(`/${SDS_SERVICE}/FetchSecrets`, pass, pass, Buffer.from([0x1a, 0x02, 0xc3, 0x28]), (e) => resolve(e)),
  );
  // (Before, FetchSecrets answered a request it could not decode UNAVAILABLE, as if the fault were ours.)
  expect([err?.code, err?.details]).toEqual([grpc.status.INVALID_ARGUMENT, "malformed discovery request: DiscoveryRequest.resource_names is not valid UTF-8"]);
});
