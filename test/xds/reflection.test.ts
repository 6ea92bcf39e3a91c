// gRPC server reflection on the XDS socket, asked by grpc-js (an independent client) the way
// grpcurl asks: list the services, then fetch the file describing ADS and decode it with
// protobufjs' descriptor schema.

import { afterEach, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import descriptor from "protobufjs/ext/descriptor";
import { join } from "node:path";
import { harnessScope } from "./harness.ts";

const scope = harnessScope(afterEach);

// The client's own view of the reflection messages: written here, not shared with src/.
const wire = protobuf.parse(
  `syntax = "proto3";
  message Req { string host = 1; oneof r { string file_by_filename = 3; string file_containing_symbol = 4; string list_services = 7; } }
  message Res { string valid_host = 1; Req original_request = 2;
    oneof m { Files file_descriptor_response = 4; Services list_services_response = 6; Err error_response = 7; } }
  message Files { repeated bytes file_descriptor_proto = 1; }
  message Services { repeated Svc service = 1; }
  message Svc { string name = 1; }
  message Err { int32 error_code = 1; string error_message = 2; }`,
  { keepCase: true },
).root;
const Req = wire.lookupType("Req");
const Res = wire.lookupType("Res");

async function ask(
  socket: string,
  service: string,
  requests: Record<string, string>[],
): Promise<{ answers: Record<string, any>[]; status: grpc.StatusObject }> {
  const def = {
    ServerReflectionInfo: {
      path: `/${service}/ServerReflectionInfo`,
      requestStream: true,
      responseStream: true,
      requestSerialize: (b: Buffer) => b,
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => b,
    },
  };
  const Ctor = grpc.makeGenericClientConstructor(def as unknown as grpc.ServiceDefinition, "refl");
  const client = new Ctor(`unix://${socket}`, grpc.credentials.createInsecure());
  const call = (client as unknown as Record<string, { call(c: grpc.Client): grpc.ClientDuplexStream<Buffer, Buffer> }>).ServerReflectionInfo!.call(client);
  const answers: Record<string, any>[] = [];
  call.on("data", (b: Buffer) => answers.push(Res.toObject(Res.decode(b), { oneofs: true })));
  call.on("error", () => {});
  const status = new Promise<grpc.StatusObject>((r) => call.on("status", r));
  for (const r of requests) call.write(Buffer.from(Req.encode(Req.fromObject(r)).finish()));
  call.end();
  const s = await status;
  client.close();
  return { answers, status: s };
}

const xdsSocket = () => join(scope.h.root, "etc/istio/proxy/XDS");

test("list_services names ADS and reflection; the ADS file describes both streaming methods with resolvable types", async () => {
  scope.h = await (await import("./harness.ts")).startHarness();
  const { answers, status } = await ask(xdsSocket(), "grpc.reflection.v1.ServerReflection", [
    { host: "agent", list_services: "" },
    { file_containing_symbol: "envoy.service.discovery.v3.AggregatedDiscoveryService" },
  ]);
  expect(status.code).toBe(grpc.status.OK);
  expect(answers).toHaveLength(2);
  expect(answers[0]!.valid_host).toBe("agent");
  expect(answers[0]!.list_services_response.service.map((s: { name: string }) => s.name)).toContain("envoy.service.discovery.v3.AggregatedDiscoveryService");

  const FDP = descriptor.FileDescriptorProto as unknown as protobuf.Type;
  const decoded = (answers[1]!.file_descriptor_response.file_descriptor_proto as Uint8Array[]).map((b) => FDP.decode(b));
  const files = decoded.map((m) => FDP.toObject(m, { enums: String }) as Record<string, any>);
  const byName = new Map(files.map((f) => [f.name, f]));
  // The file and everything it depends on, so a client can build the types without asking again.
  expect([...byName.keys()].sort()).toEqual(["envoy/service/discovery/v3/discovery.proto", "google/protobuf/any.proto", "google/rpc/status.proto"]);
  const ads = byName.get("envoy/service/discovery/v3/discovery.proto")!;
  expect(ads.package).toBe("envoy.service.discovery.v3");
  const methods = ads.service[0].method.map((m: Record<string, unknown>) => [m.name, m.inputType, m.outputType, m.clientStreaming, m.serverStreaming]);
  expect(methods).toEqual([
    ["StreamAggregatedResources", ".envoy.service.discovery.v3.DiscoveryRequest", ".envoy.service.discovery.v3.DiscoveryResponse", true, true],
    ["DeltaAggregatedResources", ".envoy.service.discovery.v3.DeltaDiscoveryRequest", ".envoy.service.discovery.v3.DeltaDiscoveryResponse", true, true],
  ]);
  // Field numbers as in Envoy's discovery.proto; a map field comes with its entry type.
  const req = ads.messageType.find((m: { name: string }) => m.name === "DiscoveryRequest");
  expect(req.field.find((f: { name: string }) => f.name === "type_url")).toMatchObject({ number: 4, type: "TYPE_STRING" });
  expect(req.field.find((f: { name: string }) => f.name === "error_detail")).toMatchObject({ number: 6, type: "TYPE_MESSAGE", typeName: ".google.rpc.Status" });
  const delta = ads.messageType.find((m: { name: string }) => m.name === "DeltaDiscoveryRequest");
  expect(delta.field.find((f: { name: string }) => f.name === "initial_resource_versions")).toMatchObject({
    number: 5,
    label: "LABEL_REPEATED",
    typeName: ".envoy.service.discovery.v3.DeltaDiscoveryRequest.InitialResourceVersionsEntry",
  });
  expect(delta.nestedType[0]).toMatchObject({ name: "InitialResourceVersionsEntry", options: { mapEntry: true } });

  // The descriptors are complete enough for protobufjs to rebuild a working type from them.
  const rebuilt = (protobuf.Root as unknown as { fromDescriptor(d: unknown): protobuf.Root }).fromDescriptor({ file: decoded });
  const T = rebuilt.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  expect((T.toObject(T.decode(T.encode(T.fromObject({ type_url: "x", response_nonce: "n" })).finish())) as Record<string, unknown>).type_url).toBe("x");
});

test("v1alpha answers too; unknown symbols and files get NOT_FOUND without ending the stream", async () => {
  scope.h = await (await import("./harness.ts")).startHarness();
  const { answers, status } = await ask(xdsSocket(), "grpc.reflection.v1alpha.ServerReflection", [
    { file_containing_symbol: "no.such.Service" },
    { file_by_filename: "google/rpc/status.proto" },
    { file_by_filename: "nope.proto" },
  ]);
  expect(status.code).toBe(grpc.status.OK);
  expect(answers.map((a) => a.error_response?.error_code ?? a.file_descriptor_response.file_descriptor_proto.length)).toEqual([5, 2, 5]);
  expect(answers[2]!.error_response.error_message).toContain("nope.proto");
});

test("a malformed reflection request ends the call with INVALID_ARGUMENT naming the input", async () => {
  scope.h = await (await import("./harness.ts")).startHarness();
  const def = {
    R: {
      path: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
      requestStream: true,
      responseStream: true,
      requestSerialize: (b: Buffer) => b,
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => b,
    },
  };
  const Ctor = grpc.makeGenericClientConstructor(def as unknown as grpc.ServiceDefinition, "r");
  const client = new Ctor(`unix://${xdsSocket()}`, grpc.credentials.createInsecure());
  const call = (client as unknown as Record<string, { call(c: grpc.Client): grpc.ClientDuplexStream<Buffer, Buffer> }>).R!.call(client);
  call.on("error", () => {});
  const status = new Promise<grpc.StatusObject>((r) => call.on("status", r));
  call.write(Buffer.from([0x0a, 0x7f])); // field 1, length 127, no bytes
  const s = await status;
  client.close();
  expect(s.code).toBe(grpc.status.INVALID_ARGUMENT);
  expect(s.details).toContain("ServerReflectionRequest");
});
