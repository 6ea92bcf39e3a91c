// The strict Envoy schema check that the bootstrap goldens and conformance cases rely on: it must
// reject what Envoy rejects, or "validates against Envoy's schema" proves nothing.

import { beforeAll, expect, test } from "bun:test";
import { EnvoySchema } from "./envoy_schema.ts";

let schema: EnvoySchema;
beforeAll(() => {
  schema = new EnvoySchema();
});

const valid = {
  node: { id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", cluster: "a.ns" },
  admin: { address: { socket_address: { address: "127.0.0.1", port_value: 15000 } } },
  static_resources: {
    clusters: [
      {
        name: "agent",
        type: "STATIC",
        connect_timeout: "0.250s",
        load_assignment: {
          cluster_name: "agent",
          endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: 15020 } } } }] }],
        },
      },
    ],
  },
};

test("a small valid bootstrap has no problems", () => {
  expect(schema.validateBootstrap(valid)).toEqual([]);
});

test.each([
  ["an unknown top-level field", { ...valid, not_a_field: 1 }, /not_a_field: unknown field in envoy\.config\.bootstrap\.v3\.Bootstrap/],
  [
    "a misspelt nested field",
    { ...valid, admin: { address: { socket_address: { address: "127.0.0.1", port: 15000 } } } },
    /socket_address\/port: unknown field/,
  ],
  [
    "a string where a message belongs",
    { ...valid, admin: { address: "127.0.0.1:15000" } },
    /admin\/address: envoy\.config\.core\.v3\.Address must be a JSON object/,
  ],
  [
    "two members of a oneof",
    { ...valid, admin: { address: { socket_address: { address: "127.0.0.1", port_value: 1 }, pipe: { path: "/x" } } } },
    /oneof address already set/,
  ],
  [
    "a wrapper written as an object (Istio's keepalive mistake)",
    {
      ...valid,
      static_resources: {
        clusters: [{ ...valid.static_resources.clusters[0], upstream_connection_options: { tcp_keepalive: { keepalive_time: { value: 1 } } } }],
      },
    },
    /keepalive_time/,
  ],
  ["the root is not an object", [], /^\/: envoy\.config\.bootstrap\.v3\.Bootstrap must be a JSON object$/],
])("rejects %s", (_name, json, problem) => {
  const errors = schema.validateBootstrap(json);
  expect(errors.length).toBeGreaterThan(0);
  expect(errors.join("\n")).toMatch(problem);
});
