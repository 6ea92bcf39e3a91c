// Strict proto-JSON encoding: what it accepts (both name styles, Any with @type, durations,
// wrappers, Struct, enums by name), what it rejects (with the path and a hint), and that every
// field of our minimal schemas matches Envoy's real protos (name, number, type, cardinality).

import { beforeAll, describe, expect, test } from "bun:test";
import protobuf from "protobufjs";
import { ProtoJson } from "../../src/local/protojson.ts";
import { localSchema } from "../../src/local/schema.ts";
import { decodeAs, envoyRoot } from "./support.ts";

let envoy: protobuf.Root;
const local = localSchema();
const pj = new ProtoJson(local);

beforeAll(async () => {
  envoy = await envoyRoot();
});

const CLUSTER = "envoy.config.cluster.v3.Cluster";

describe("accepts Envoy's YAML/JSON forms and encodes real Envoy bytes", () => {
  const cases: [string, string, unknown, Record<string, unknown>][] = [
    [
      "snake_case names",
      CLUSTER,
      { name: "c", connect_timeout: "0.25s", lb_policy: "RING_HASH" },
      { name: "c", connect_timeout: { nanos: 250_000_000 }, lb_policy: "RING_HASH" },
    ],
    [
      "camelCase names",
      CLUSTER,
      { name: "c", connectTimeout: "5s", lbPolicy: "LEAST_REQUEST" },
      { name: "c", connect_timeout: { seconds: 5 }, lb_policy: "LEAST_REQUEST" },
    ],
    [
      "enum by number, wrappers as plain values",
      "envoy.config.endpoint.v3.LocalityLbEndpoints",
      { load_balancing_weight: 3, priority: 1, lb_endpoints: [{ health_status: 1 }] },
      { load_balancing_weight: { value: 3 }, priority: 1, lb_endpoints: [{ health_status: "HEALTHY" }] },
    ],
    ["integers given as strings", "envoy.config.core.v3.SocketAddress", { address: "::1", port_value: "8080" }, { address: "::1", port_value: 8080 }],
    ["null means unset", CLUSTER, { name: "c", lb_policy: null }, { name: "c" }],
    ["oneof member at its default is kept", "envoy.config.route.v3.RouteMatch", { prefix: "" }, { prefix: "" }],
    ["bytes as base64", "envoy.config.core.v3.DataSource", { inline_bytes: Buffer.from("pem").toString("base64") }, { inline_bytes: Buffer.from("pem") }],
    [
      "Struct metadata (protobufjs names Value's fields in camelCase)",
      "envoy.config.core.v3.Metadata",
      { filter_metadata: { istio: { a: 1, b: [true, "x"], c: null } } },
      {
        filter_metadata: {
          istio: {
            fields: { a: { numberValue: 1 }, b: { listValue: { values: [{ boolValue: true }, { stringValue: "x" }] } }, c: { nullValue: "NULL_VALUE" } },
          },
        },
      },
    ],
  ];
  for (const [name, type, json, want] of cases) {
    test(name, () => {
      expect(decodeAs(envoy, type, pj.encode(type, json))).toEqual(want as Record<string, any>);
    });
  }

  test("Any fields carry the named type's bytes, nested Any included", () => {
    const bytes = pj.encode("envoy.config.listener.v3.Listener", {
      name: "l",
      filter_chains: [
        {
          filters: [
            {
              name: "hcm",
              typed_config: {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                stat_prefix: "s",
                route_config: {
                  name: "r",
                  virtual_hosts: [
                    { name: "v", domains: ["*"], routes: [{ match: { path: "/x" }, direct_response: { status: 200, body: { inline_string: "ok" } } }] },
                  ],
                },
                http_filters: [
                  {
                    name: "router",
                    typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router", suppress_envoy_headers: true },
                  },
                ],
              },
            },
          ],
        },
      ],
    });
    const l = decodeAs(envoy, "envoy.config.listener.v3.Listener", bytes);
    const any = l.filter_chains[0].filters[0].typed_config;
    const hcm = decodeAs(envoy, any.type_url.split("/")[1], any.value);
    expect(hcm.route_config.virtual_hosts[0].routes[0].direct_response).toEqual({ status: 200, body: { inline_string: "ok" } });
    const router = hcm.http_filters[0].typed_config;
    expect(decodeAs(envoy, router.type_url.split("/")[1], router.value)).toEqual({ suppress_envoy_headers: true });
  });

  test("well-known types inside Any use {@type, value}", () => {
    const b = pj.encode("envoy.config.core.v3.TypedExtensionConfig", {
      name: "n",
      typed_config: { "@type": "type.googleapis.com/google.protobuf.UInt32Value", value: 7 },
    });
    const o = decodeAs(envoy, "envoy.config.core.v3.TypedExtensionConfig", b);
    expect(o.typed_config.type_url).toBe("type.googleapis.com/google.protobuf.UInt32Value");
    expect([...o.typed_config.value]).toEqual([0x08, 7]);
  });
});

describe("rejects what it does not know, naming where", () => {
  const cases: [string, string, unknown, string][] = [
    [
      "misspelt field with a hint",
      CLUSTER,
      { name: "c", lbPolicyy: "ROUND_ROBIN" },
      `unknown field "lbPolicyy" in envoy.config.cluster.v3.Cluster (did you mean "lb_policy"?)`,
    ],
    [
      "unknown nested field",
      CLUSTER,
      { load_assignment: { endpoints: [{ lb_endpoints: [{ endpoint: { adress: {} } }] }] } },
      `load_assignment.endpoints[0].lb_endpoints[0].endpoint: unknown field "adress" in envoy.config.endpoint.v3.Endpoint (did you mean "address"?)`,
    ],
    [
      "bad enum name",
      CLUSTER,
      { type: "EDSS" },
      `type: invalid value "EDSS" for enum envoy.config.cluster.v3.Cluster.DiscoveryType (want one of STATIC, STRICT_DNS, LOGICAL_DNS, EDS, ORIGINAL_DST)`,
    ],
    [
      "two members of a oneof",
      "envoy.config.route.v3.RouteMatch",
      { prefix: "/", path: "/x" },
      `"prefix" and "path" are alternatives (oneof path_specifier); set only one`,
    ],
    ["duration without unit", CLUSTER, { connect_timeout: "5" }, `connect_timeout: invalid duration "5" (want seconds with an "s" suffix, e.g. "5s", "0.25s")`],
    ["duration as a number", CLUSTER, { connect_timeout: 5 }, `connect_timeout: want a duration string like "1s" or "0.250s", got number 5`],
    ["out of range", "envoy.config.core.v3.SocketAddress", { port_value: -1 }, `port_value: -1 is out of range for uint32`],
    ["string for a number", "envoy.config.core.v3.SocketAddress", { port_value: "http" }, `port_value: want an integer (uint32), got string "http"`],
    ["number for a string", "envoy.config.core.v3.SocketAddress", { address: 10 }, `address: want a string, got number 10`],
    ["scalar for a list", "envoy.config.route.v3.VirtualHost", { domains: "*" }, `domains: want a list, got string "*"`],
    [
      "Any without @type",
      "envoy.config.core.v3.TransportSocket",
      { typed_config: { sni: "x" } },
      `typed_config: missing "@type" (e.g. "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router")`,
    ],
    [
      "Any of an unknown type",
      "envoy.config.core.v3.TransportSocket",
      { typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault" } },
      `typed_config: unknown @type "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault" (local mode encodes only the Envoy types listed in docs/local-mode.md)`,
    ],
    [
      "unknown field inside an Any",
      "envoy.config.core.v3.TransportSocket",
      { typed_config: { "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", snii: "x" } },
      `typed_config: unknown field "snii" in envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext (did you mean "sni"?)`,
    ],
  ];
  for (const [name, type, json, message] of cases) {
    test(name, () => {
      expect(() => pj.encode(type, json)).toThrow(message);
    });
  }
});

const OPAQUE_FIELDS = new Set(["envoy.service.discovery.v3.DiscoveryRequest.node", "envoy.service.discovery.v3.DeltaDiscoveryRequest.node"]);

test("every field of our minimal schemas matches Envoy's real protos", () => {
  const mismatches: string[] = [];
  let checked = 0;
  const walk = (ns: protobuf.NamespaceBase) => {
    for (const obj of ns.nestedArray) {
      if (obj instanceof protobuf.Type) {
        const name = obj.fullName.slice(1);
        if (!name.startsWith("google.protobuf.")) {
          const real = envoy.lookup(name);
          if (!(real instanceof protobuf.Type)) mismatches.push(`${name}: not in Envoy's protos`);
          else {
            for (const f of obj.fieldsArray) {
              checked++;
              const r = real.fields[f.name];
              f.resolve();
              r?.resolve();
              const t = (x: protobuf.Field) => x.resolvedType?.fullName ?? x.type;
              // The discovery schema, shared with the relay, keeps `node` as opaque bytes: the same
              // wire encoding (length-delimited) as Envoy's Node message, decoded only where read.
              const opaqueMessage = f.type === "bytes" && r?.resolvedType instanceof protobuf.Type && OPAQUE_FIELDS.has(`${name}.${f.name}`);
              if (!r) mismatches.push(`${name}.${f.name}: no such field`);
              else if (opaqueMessage) continue;
              else if (r.id !== f.id || t(r) !== t(f) || r.repeated !== f.repeated || r.map !== f.map || (r.partOf?.name ?? "") !== (f.partOf?.name ?? "")) {
                mismatches.push(`${name}.${f.name}: ours ${f.id}/${t(f)}/${f.partOf?.name ?? ""}, Envoy ${r.id}/${t(r)}/${r.partOf?.name ?? ""}`);
              }
            }
          }
        }
      }
      if (obj instanceof protobuf.Enum) {
        const real = envoy.lookup(obj.fullName.slice(1));
        if (!(real instanceof protobuf.Enum)) mismatches.push(`${obj.fullName}: enum not in Envoy's protos`);
        else
          for (const [k, v] of Object.entries(obj.values))
            if (real.values[k] !== v) mismatches.push(`${obj.fullName}.${k}: ours ${v}, Envoy ${real.values[k]}`);
      }
      if (obj instanceof protobuf.Namespace || obj instanceof protobuf.Type) walk(obj);
    }
  };
  walk(local);
  expect(mismatches).toEqual([]);
  expect(checked).toBeGreaterThan(150);
});
