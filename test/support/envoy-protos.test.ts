// The Envoy proto root the tests and the stand-in Envoy load from node_modules/.cache must be the
// root that parsing the .proto texts gives: same definitions, same bytes on the wire.

import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import protobuf from "protobufjs";
import { envoyProtoCachePath, envoyProtoRoot, parseEnvoyProtos } from "./envoy-protos.ts";

const parsed = parseEnvoyProtos();
envoyProtoRoot(); // writes the cache when there is none yet
// What every later process loads: the file itself.
const cached = protobuf.Root.fromJSON(JSON.parse(readFileSync(envoyProtoCachePath(), "utf8")) as protobuf.INamespace);

/**
 * Envoy's definitions (the `envoy` namespace), without enum values' options, which protobufjs's
 * fromJSON does not read back (no test uses them). Not google.*: protobufjs shares those between
 * the roots of one process, so their JSON depends on what the process loaded before (seen in the
 * full suite: descriptor.proto's fields camelCased by an earlier load).
 */
function definitions(root: protobuf.Root): unknown {
  const json = JSON.parse(JSON.stringify(root.toJSON()), (k, v: unknown) => (k === "valuesOptions" ? undefined : v)) as { nested: { envoy: unknown } };
  return json.nested.envoy;
}

test("the cache holds the parsed definitions of Envoy's API", () => {
  const want = definitions(parsed);
  expect(JSON.stringify(want)).toContain('"ApiVersion":{"values":{"AUTO":0,"V2":1,"V3":2}}');
  expect(definitions(cached)).toEqual(want);
});

test("messages encode to the same bytes through the cached root as through the parsed one", () => {
  const request = {
    type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
    version_info: "v1",
    resource_names: ["a", "b"],
    node: {
      id: "sidecar~10.0.0.1~p.ns~ns.svc.cluster.local",
      metadata: { fields: { ISTIO_VERSION: { stringValue: "1.24" }, LABELS: { structValue: { fields: { app: { stringValue: "x" } } } } } },
    },
  };
  const listener = {
    name: "0.0.0.0_15006",
    address: { socket_address: { address: "0.0.0.0", port_value: 15006 } },
    filter_chains: [
      { filters: [{ name: "envoy.filters.network.tcp_proxy", typed_config: { type_url: "type.googleapis.com/x", value: new Uint8Array([1, 2, 3]) } }] },
    ],
  };
  for (const [name, obj] of [
    ["envoy.service.discovery.v3.DiscoveryRequest", request],
    ["envoy.config.listener.v3.Listener", listener],
  ] as const) {
    const a = parsed.lookupType(name);
    const b = cached.lookupType(name);
    const bytes = a.encode(a.fromObject(obj)).finish();
    expect(bytes.length).toBeGreaterThan(20);
    expect(Buffer.from(b.encode(b.fromObject(obj)).finish()).toString("hex")).toBe(Buffer.from(bytes).toString("hex"));
    expect(b.toObject(b.decode(bytes), { enums: String })).toEqual(a.toObject(a.decode(bytes), { enums: String }));
  }
});
