// bench/envoy-fast.ts writes and reads its few protobuf fields by hand; protobufjs over Envoy's
// own protos (an independent codec) must read what it writes and write what it reads. The compiled
// stand-in then speaks gRPC as Envoy does: the Node first, ACKs with version and nonce, records.

import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileFastEnvoy, decodeResponse, encodeRequest } from "../../bench/envoy-fast.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

const dir = mkdtempSync(join(tmpdir(), "envoy-fast-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const root = envoyProtoRoot();
const Req = root.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
const Res = root.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
const Secret = root.lookupType("envoy.extensions.transport_sockets.tls.v3.Secret");
const SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

test("a request with its Node, as protobufjs reads it", () => {
  const bytes = encodeRequest({
    typeUrl: SECRET,
    names: ["default"],
    version: "v7",
    nonce: "n1",
    node: {
      id: "sidecar~10.1.2.3~p.ns~ns.svc.cluster.local",
      cluster: "p.ns",
      metadata: { ISTIO_VERSION: "1.24", N: 3.5, ON: true, NIL: null, L: ["a", 2], S: { k: "v" } },
    },
  });
  expect(Req.toObject(Req.decode(bytes), { defaults: false })).toEqual({
    version_info: "v7",
    node: {
      id: "sidecar~10.1.2.3~p.ns~ns.svc.cluster.local",
      cluster: "p.ns",
      user_agent_name: "envoy",
      metadata: {
        fields: {
          ISTIO_VERSION: { stringValue: "1.24" },
          N: { numberValue: 3.5 },
          ON: { boolValue: true },
          NIL: { nullValue: 0 },
          L: { listValue: { values: [{ stringValue: "a" }, { numberValue: 2 }] } },
          S: { structValue: { fields: { k: { stringValue: "v" } } } },
        },
      },
    },
    resource_names: ["default"],
    type_url: SECRET,
    response_nonce: "n1",
  });
  // protobufjs's bundled struct.proto has camelCase names. An ACK without a Node or names: only what is set.
  expect(Req.toObject(Req.decode(encodeRequest({ typeUrl: "t", version: "1", nonce: "2" })))).toEqual({
    version_info: "1",
    type_url: "t",
    response_nonce: "2",
  });
});

test("a response written by protobufjs: version, type, nonce and each resource's name", () => {
  const secret = (name: string) => ({
    type_url: SECRET,
    value: Secret.encode(Secret.fromObject({ name, tls_certificate: { certificate_chain: { inline_bytes: Buffer.from("x".repeat(300)) } } })).finish(),
  });
  const bytes = Res.encode(
    Res.fromObject({ version_info: "2026-11-28T03:40:00Z/3", resources: [secret("default"), secret("ROOTCA")], type_url: SECRET, nonce: "abc" }),
  ).finish();
  expect(decodeResponse(bytes)).toEqual({ version: "2026-11-28T03:40:00Z/3", typeUrl: SECRET, nonce: "abc", names: ["default", "ROOTCA"] });
  expect(() => decodeResponse(bytes.subarray(0, bytes.length - 3))).toThrow("runs past the end of the message");
});

test("compiled, it opens ADS with the Node and SDS per secret, ACKs each answer and records it", async () => {
  const bin = compileFastEnvoy(join(dir, "bin"));
  const requests: { path: string; req: Record<string, unknown> }[] = [];
  const servers: http2.Http2Server[] = [];
  const serve = (sock: string, answer: (path: string, req: Record<string, unknown>) => Uint8Array | undefined) =>
    new Promise<void>((res) => {
      const s = http2.createServer();
      s.on("stream", (st: http2.ServerHttp2Stream, headers) => {
        st.respond({ ":status": 200, "content-type": "application/grpc" });
        let buf: Buffer = Buffer.alloc(0);
        st.on("data", (c: Buffer) => {
          buf = Buffer.concat([buf, c]);
          while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
            const req = Req.toObject(Req.decode(buf.subarray(5, 5 + buf.readUInt32BE(1))), { defaults: false }) as Record<string, unknown>;
            buf = buf.subarray(5 + buf.readUInt32BE(1));
            requests.push({ path: String(headers[":path"]), req });
            const out = answer(String(headers[":path"]), req);
            if (out) {
              const f = Buffer.alloc(5 + out.length);
              f.writeUInt32BE(out.length, 1);
              f.set(out, 5);
              st.write(f);
            }
          }
        });
      });
      servers.push(s);
      s.listen(sock, res);
    });
  const first = (req: Record<string, unknown>) => !req.response_nonce;
  await serve(join(dir, "xds.sock"), (_, req) =>
    first(req) && req.type_url === "type.googleapis.com/envoy.config.cluster.v3.Cluster"
      ? Res.encode(Res.fromObject({ version_info: "c1", type_url: req.type_url, nonce: "cn" })).finish()
      : undefined,
  );
  await serve(join(dir, "sds.sock"), (_, req) => {
    if (!first(req)) return undefined;
    const name = (req.resource_names as string[])[0]!;
    return Res.encode(
      Res.fromObject({
        version_info: "s1",
        type_url: SECRET,
        nonce: `sn-${name}`,
        resources: [{ type_url: SECRET, value: Secret.encode(Secret.fromObject({ name })).finish() }],
      }),
    ).finish();
  });
  const pipe = (name: string, sock: string) => ({
    name,
    load_assignment: { endpoints: [{ lb_endpoints: [{ endpoint: { address: { pipe: { path: join(dir, sock) } } } }] }] },
  });
  writeFileSync(
    join(dir, "bootstrap.json"),
    JSON.stringify({
      node: { id: "sidecar~10.0.0.9~a.ns~ns.svc.cluster.local", cluster: "a.ns", metadata: { NAMESPACE: "ns" } },
      static_resources: { clusters: [pipe("xds-grpc", "xds.sock"), pipe("sds-grpc", "sds.sock")] },
    }),
  );
  const records = join(dir, "records.jsonl");
  const p = Bun.spawn([bin, "-c", join(dir, "bootstrap.json"), "--drain-time-s", "45"], {
    env: { ...process.env, INTEROP_ENVOY_RECORD: records },
    stdout: "ignore",
    stderr: "pipe",
  });
  const acks = () =>
    requests
      .filter((r) => r.req.response_nonce)
      .map(
        (r) =>
          `${r.path.split("/")[1]} ${String(r.req.type_url).split(".").pop()} ${r.req.version_info} ${r.req.response_nonce} ${String(r.req.resource_names ?? "")}`,
      );
  for (let i = 0; i < 200 && acks().length < 3; i++) await Bun.sleep(25);
  p.kill("SIGTERM");
  expect(await p.exited).toBe(0);
  for (const s of servers) s.close();
  expect(acks().sort()).toEqual([
    "envoy.service.discovery.v3.AggregatedDiscoveryService Cluster c1 cn ",
    "envoy.service.secret.v3.SecretDiscoveryService Secret s1 sn-ROOTCA ROOTCA",
    "envoy.service.secret.v3.SecretDiscoveryService Secret s1 sn-default default",
  ]);
  const firsts = requests.filter((r) => first(r.req));
  // ADS: the Node on the first request only (CDS), then LDS; SDS: the Node on each stream's first.
  expect(firsts.map((r) => `${String(r.req.type_url).split(".").pop()} ${(r.req.node as { id?: string } | undefined)?.id ?? "-"}`).sort()).toEqual([
    "Cluster sidecar~10.0.0.9~a.ns~ns.svc.cluster.local",
    "Listener -",
    "Secret sidecar~10.0.0.9~a.ns~ns.svc.cluster.local",
    "Secret sidecar~10.0.0.9~a.ns~ns.svc.cluster.local",
  ]);
  expect((firsts.find((r) => String(r.req.type_url).endsWith("Cluster"))!.req.node as { metadata: unknown }).metadata).toEqual({
    fields: { NAMESPACE: { stringValue: "ns" } },
  });
  const events = readFileSync(records, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { event: string; names?: string[]; typeUrl?: string; pid: number });
  expect(events[0]).toMatchObject({ event: "start", pid: p.pid });
  expect(
    events
      .filter((e) => e.event === "sds")
      .map((e) => e.names![0])
      .sort(),
  ).toEqual(["ROOTCA", "default"]);
  expect(events.filter((e) => e.event === "xds").map((e) => e.typeUrl)).toEqual(["type.googleapis.com/envoy.config.cluster.v3.Cluster"]);
  expect(events.at(-1)).toMatchObject({ event: "signal", message: "SIGTERM" });
}, 60_000);
