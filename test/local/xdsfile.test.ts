// The local xDS file format: the example parses, JSON works too, versions are content hashes,
// and every kind of bad file is one line naming the file and the resource.

import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ProtoJson } from "../../src/local/protojson.ts";
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, localSchema, ROUTE_TYPE, SECRET_TYPE } from "../../src/local/schema.ts";
import { diffSnapshots } from "../../src/local/snapshot.ts";
import { parseXdsFile } from "../../src/local/xdsfile.ts";
import { fixtureYaml } from "./fixtures.ts";

const pj = new ProtoJson(localSchema());
const EXAMPLE = readFileSync(join(import.meta.dir, "../../examples/xds.yaml"), "utf8");

function names(text: string) {
  const s = parseXdsFile("f.yaml", text, pj);
  return Object.fromEntries([...s.types].map(([t, m]) => [t.split(".").pop(), [...m.keys()]]));
}

test("examples/xds.yaml parses into one listener, route, cluster and endpoints", () => {
  expect(names(EXAMPLE)).toEqual({
    Listener: ["greeter.demo:50051"],
    RouteConfiguration: ["greeter.demo:50051"],
    Cluster: ["outbound|50051||greeter.demo"],
    ClusterLoadAssignment: ["outbound|50051||greeter.demo"],
    Secret: [],
  });
});

test("JSON is accepted, and `@type` on a resource may repeat its list's type", () => {
  const json = JSON.stringify({
    clusters: [{ "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", name: "c", type: "STATIC" }],
    endpoints: [{ clusterName: "c" }],
  });
  expect(names(json)).toMatchObject({ Cluster: ["c"], ClusterLoadAssignment: ["c"] });
});

test("an empty file is an empty set", () => {
  const s = parseXdsFile("f.yaml", "# nothing yet\n", pj);
  expect([...s.types.values()].every((m) => m.size === 0)).toBe(true);
});

test("versions are content hashes: same bytes, same version; the diff names what changed", () => {
  const a = parseXdsFile("f.yaml", fixtureYaml(), pj);
  const again = parseXdsFile("f.yaml", fixtureYaml() + "\n# a comment\n", pj);
  expect(again.version).toBe(a.version);
  expect(diffSnapshots(a, again)).toEqual([]);
  const b = parseXdsFile("f.yaml", fixtureYaml({ withA: false, bTimeout: "2s" }), pj);
  expect(diffSnapshots(a, b)).toEqual([
    { typeUrl: CLUSTER_TYPE, changed: ["b"], removed: ["a"] },
    { typeUrl: ENDPOINT_TYPE, changed: [], removed: ["a"] },
  ]);
  expect(resourceVersion(a, LISTENER_TYPE, "tcp-in")).toBe(resourceVersion(b, LISTENER_TYPE, "tcp-in"));
  expect(resourceVersion(a, ROUTE_TYPE, "svc-route")).toMatch(/^[0-9a-f]{12}$/);
  expect(resourceVersion(a, SECRET_TYPE, "default")).toMatch(/^[0-9a-f]{12}$/);
});

function resourceVersion(s: ReturnType<typeof parseXdsFile>, t: string, n: string) {
  return s.types.get(t)?.get(n)?.version;
}

describe("bad files: one line with the path and the offending resource", () => {
  const cases: [string, string, string][] = [
    [
      "typo in a field",
      "clusters:\n  - name: a\n  - name: b\n  - name: foo\n    lbPolicyy: ROUND_ROBIN\n",
      `examples/xds.yaml: clusters[2] "foo": unknown field "lbPolicyy" in envoy.config.cluster.v3.Cluster (did you mean "lb_policy"?)`,
    ],
    ["not YAML", "clusters: [\n  - name: a\n", "examples/xds.yaml: line "],
    [
      "unknown top-level key",
      "cluster:\n  - name: a\n",
      `examples/xds.yaml: unknown top-level key "cluster" (want listeners, routes, clusters, endpoints, secrets)`,
    ],
    ["a list that is not a list", "routes: {name: r}\n", "examples/xds.yaml: routes: want a list of envoy.config.route.v3.RouteConfiguration, got object"],
    ["missing name", "listeners:\n  - address: {}\n", `examples/xds.yaml: listeners[0]: missing "name"`],
    ["endpoints are named by cluster_name", "endpoints:\n  - name: x\n", `examples/xds.yaml: endpoints[0]: missing "cluster_name"`],
    ["duplicate name", "clusters:\n  - name: a\n  - name: b\n  - name: a\n", `examples/xds.yaml: clusters[2] "a": duplicate name (also clusters[0])`],
    [
      "wrong @type for the list",
      `secrets:\n  - "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster\n    name: s\n`,
      `examples/xds.yaml: secrets[0] "s": "@type" is "type.googleapis.com/envoy.config.cluster.v3.Cluster" but secrets hold type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret`,
    ],
    ["a scalar document", "42\n", "examples/xds.yaml: want a mapping with listeners, routes, clusters, endpoints, secrets lists at the top level"],
    ["duplicate keys", "clusters: []\nclusters: []\n", "examples/xds.yaml: line 2"],
  ];
  for (const [name, text, message] of cases) {
    test(name, () => {
      expect(() => parseXdsFile("examples/xds.yaml", text, pj)).toThrow(message);
    });
  }
});
