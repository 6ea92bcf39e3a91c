// A real, independent xDS client in Envoy's place: @grpc/grpc-js-xds resolves `xds:///echo`
// through the agent's XDS socket (gRPC bootstrap written here, format of reference §11) from
// Listener/RouteConfiguration/Cluster/ClusterLoadAssignment resources the fake istiod serves over
// TLS, then makes a real gRPC call to a test server.

import { afterAll, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { envoyProtoRoot } from "../support/envoy-protos.ts";
import { serve, type AnyResource } from "../support/fake-istiod.ts";
import { startHarness, type Harness } from "./harness.ts";

const envoyRoot = envoyProtoRoot;

const T = (root: protobuf.Root, name: string, obj: Record<string, unknown>): Uint8Array => {
  const t = root.lookupType(name);
  return t.encode(t.fromObject(obj)).finish();
};
const url = (name: string) => `type.googleapis.com/${name}`;

let h: Harness | undefined;
let echo: grpc.Server | undefined;
afterAll(async () => {
  echo?.forceShutdown();
  await h?.stop();
});

test("grpc-js-xds resolves xds:///echo through the agent and calls the test server", async () => {
  const id = (b: Buffer) => b;
  const echoDef = {
    Say: {
      path: "/test.Echo/Say",
      requestStream: false,
      responseStream: false,
      requestSerialize: id,
      requestDeserialize: id,
      responseSerialize: id,
      responseDeserialize: id,
    },
  };
  echo = new grpc.Server();
  echo.addService(echoDef as unknown as grpc.ServiceDefinition, {
    Say: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from("echo:"), call.request])),
  });
  const echoPort = await new Promise<number>((res, rej) =>
    echo!.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );

  const root = envoyRoot();
  const router = T(root, "envoy.extensions.filters.http.router.v3.Router", {});
  const hcm = T(root, "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", {
    rds: { config_source: { ads: {} }, route_config_name: "echo-route" },
    http_filters: [{ name: "router", typed_config: { type_url: url("envoy.extensions.filters.http.router.v3.Router"), value: router } }],
  });
  const table = new Map<string, AnyResource[]>([
    [
      url("envoy.config.listener.v3.Listener"),
      [
        {
          typeUrl: url("envoy.config.listener.v3.Listener"),
          value: T(root, "envoy.config.listener.v3.Listener", {
            name: "echo",
            api_listener: { api_listener: { type_url: url("envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"), value: hcm } },
          }),
        },
      ],
    ],
    [
      url("envoy.config.route.v3.RouteConfiguration"),
      [
        {
          typeUrl: url("envoy.config.route.v3.RouteConfiguration"),
          value: T(root, "envoy.config.route.v3.RouteConfiguration", {
            name: "echo-route",
            virtual_hosts: [{ name: "vh", domains: ["*"], routes: [{ match: { prefix: "" }, route: { cluster: "echo-cluster" } }] }],
          }),
        },
      ],
    ],
    [
      url("envoy.config.cluster.v3.Cluster"),
      [
        {
          typeUrl: url("envoy.config.cluster.v3.Cluster"),
          value: T(root, "envoy.config.cluster.v3.Cluster", {
            name: "echo-cluster",
            type: "EDS",
            eds_cluster_config: { eds_config: { ads: {} } },
            lb_policy: "ROUND_ROBIN",
          }),
        },
      ],
    ],
    [
      url("envoy.config.endpoint.v3.ClusterLoadAssignment"),
      [
        {
          typeUrl: url("envoy.config.endpoint.v3.ClusterLoadAssignment"),
          value: T(root, "envoy.config.endpoint.v3.ClusterLoadAssignment", {
            cluster_name: "echo-cluster",
            endpoints: [
              {
                locality: { region: "r1" },
                load_balancing_weight: { value: 1 },
                lb_endpoints: [{ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: echoPort } } } }],
              },
            ],
          }),
        },
      ],
    ],
  ]);

  h = await startHarness({ dns: true });
  h.istiod.onStream = (s) => serve(s, table);
  const bootstrap = join(h.root, "grpc-bootstrap.json");
  writeFileSync(
    bootstrap,
    JSON.stringify({
      xds_servers: [{ server_uri: `unix://${h.proxy.socketPath}`, channel_creds: [{ type: "insecure" }], server_features: ["xds_v3"] }],
      node: { id: "sidecar~127.0.0.1~echo-client.default~default.svc.cluster.local", locality: {}, metadata: { GENERATOR: "grpc" } },
    }),
  );
  process.env.GRPC_XDS_BOOTSTRAP = bootstrap;
  (await import("@grpc/grpc-js-xds")).register();

  const Ctor = grpc.makeGenericClientConstructor(echoDef as unknown as grpc.ServiceDefinition, "echo");
  const client = new Ctor("xds:///echo", grpc.credentials.createInsecure());
  const reply = await new Promise<Buffer>((res, rej) => {
    (client as unknown as { Say(b: Buffer, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: Buffer) => void): void }).Say(
      Buffer.from("hi"),
      { deadline: Date.now() + 10_000 },
      (e, r) => (e ? rej(e) : res(r)),
    );
  });
  client.close();
  expect(reply.toString()).toBe("echo:hi");
  // The upstream saw the client's own node in the first request, forwarded untouched, plus the
  // agent's NDS subscription after the first Listener request.
  const up = h.istiod.streams[0]!;
  const types = up.requests.map((r) => r.typeUrl);
  expect(types).toContain(url("envoy.config.listener.v3.Listener"));
  expect(types).toContain(url("envoy.config.endpoint.v3.ClusterLoadAssignment"));
  expect(types).toContain(url("istio.networking.nds.v1.NameTable"));
  expect(h.readiness.isReady()).toBe(true);
}, 20_000);
