// The SDS codec's own cost (not part of `bun run bench`): the server's wire codec (src/sds/wire.ts)
// beside the schema-built protobufjs codec it replaced (src/sds/proto.ts's request decoders, and
// protobufjs encoding the same Secret), on the messages of an SDS burst: Envoy's first
// StreamSecrets request (with its node) decoded, an ACK decoded, a Delta reconnect decoded, and a
// Secret (a 2.5 KiB chain and key) encoded. Best of 5 runs of N operations each, ns per operation.
// Usage: bun bench/sds-codec.ts [N]

import { sdsCodec } from "../src/sds/proto.ts";
import { SECRET_TYPE_URL, decodeDeltaDiscoveryRequest, decodeDiscoveryRequest, encodeSecret } from "../src/sds/wire.ts";
import { envoyProtoRoot } from "../test/support/envoy-protos.ts";

const N = Number(process.argv[2] ?? 100_000);
const envoy = envoyProtoRoot();
const Req = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
const DReq = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
const Secret = envoy.lookupType("envoy.extensions.transport_sockets.tls.v3.Secret");
const schema = sdsCodec();

const node = {
  id: "sidecar~10.1.2.3~app-7d9.default~default.svc.cluster.local",
  cluster: "app.default",
  metadata: { fields: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`KEY_${i}`, { string_value: `value-${i}` }])) },
};
const first = Buffer.from(Req.encode(Req.fromObject({ node, type_url: SECRET_TYPE_URL, resource_names: ["default"] })).finish());
const ack = Buffer.from(
  Req.encode(
    Req.fromObject({
      version_info: "2026-11-24T15:00:00Z/3",
      response_nonce: "0b6c4f7e-1d2a-4c3b-9e8f-7a6b5c4d3e2f",
      type_url: SECRET_TYPE_URL,
      resource_names: ["default"],
    }),
  ).finish(),
);
const reconnect = Buffer.from(
  DReq.encode(
    DReq.fromObject({
      node,
      type_url: SECRET_TYPE_URL,
      resource_names_subscribe: ["default", "ROOTCA"],
      initial_resource_versions: { default: "h1", ROOTCA: "h2" },
    }),
  ).finish(),
);
const pem = (label: string) => `-----BEGIN ${label}-----\n${"QUJDRA".repeat(200)}\n-----END ${label}-----\n`;
const secret = { name: "default", kind: "tls" as const, certificateChain: pem("CERTIFICATE"), privateKey: pem("PRIVATE KEY") };
const protobufjsSecret = (s: typeof secret) =>
  Secret.encode(
    Secret.fromObject({
      name: s.name,
      tls_certificate: { certificate_chain: { inline_bytes: Buffer.from(s.certificateChain) }, private_key: { inline_bytes: Buffer.from(s.privateKey) } },
    }),
  ).finish();

function nsPerOp(f: () => unknown): number {
  let best = Infinity;
  for (let run = 0; run < 5; run++) {
    const t0 = Bun.nanoseconds();
    for (let i = 0; i < N; i++) f();
    best = Math.min(best, (Bun.nanoseconds() - t0) / N);
  }
  return best;
}

const rows: [string, () => unknown, () => unknown][] = [
  [`first StreamSecrets request with node (${first.length} B), decode`, () => decodeDiscoveryRequest(first), () => schema.decodeRequest(first)],
  [`ACK (${ack.length} B), decode`, () => decodeDiscoveryRequest(ack), () => schema.decodeRequest(ack)],
  [`Delta reconnect with node (${reconnect.length} B), decode`, () => decodeDeltaDiscoveryRequest(reconnect), () => schema.decodeDeltaRequest(reconnect)],
  [`Secret (${encodeSecret(secret).length} B), encode`, () => encodeSecret(secret), () => protobufjsSecret(secret)],
];
console.log(`| message | wire codec ns/op | protobufjs ns/op | wire ÷ protobufjs |\n|---|---|---|---|`);
for (const [what, wire, pbjs] of rows) {
  const a = nsPerOp(wire);
  const b = nsPerOp(pbjs);
  console.log(`| ${what} | ${a.toFixed(0)} | ${b.toFixed(0)} | ${(a / b).toFixed(2)} |`);
}
const load = (await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ");
console.log(`\n${N} operations a run, best of 5; load average ${load}.`);
