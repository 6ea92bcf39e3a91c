// gRPC server reflection on the XDS socket, as Istio's agent registers it: `grpcurl -unix
// ./etc/istio/proxy/XDS list` and `describe` work against the agent. v1 and v1alpha (same wire
// messages). The descriptors are built from the schemas the agent itself uses (proto/discovery.proto
// and friends: the public names and field numbers, only the fields the agent knows), and only on
// the first reflection call: this module is imported lazily, off the start path.

import protobuf from "protobufjs";
import descriptor from "protobufjs/ext/descriptor";
import discoveryText from "../../proto/discovery.proto" with { type: "text" };
import reflectionText from "../../proto/grpc-reflection.proto" with { type: "text" };
import anyText from "../../proto/xds-any.proto" with { type: "text" };
import statusText from "../../proto/xds-rpc-status.proto" with { type: "text" };
import { ADS_SERVICE, REFLECTION_SERVICES } from "./types.ts";
import { checkedInput } from "../lib/protobuf-input.ts";

/** The files described, in dependency order, under the names Envoy's and Google's protos use. */
const FILES: readonly { name: string; text: string; deps: string[] }[] = [
  { name: "google/protobuf/any.proto", text: anyText as string, deps: [] },
  { name: "google/rpc/status.proto", text: statusText as string, deps: ["google/protobuf/any.proto"] },
  { name: "envoy/service/discovery/v3/discovery.proto", text: discoveryText as string, deps: ["google/protobuf/any.proto", "google/rpc/status.proto"] },
];

const NOT_FOUND = 5;
const UNIMPLEMENTED = 12;

const SCALAR: Record<string, number> = {
  double: 1,
  float: 2,
  int64: 3,
  uint64: 4,
  int32: 5,
  fixed64: 6,
  fixed32: 7,
  bool: 8,
  string: 9,
  bytes: 12,
  uint32: 13,
  sfixed32: 15,
  sfixed64: 16,
  sint32: 17,
  sint64: 18,
};
const TYPE_MESSAGE = 11;
const TYPE_ENUM = 14;
const LABEL_OPTIONAL = 1;
const LABEL_REPEATED = 3;

type Obj = Record<string, unknown>;

const bare = (fullName: string) => fullName.replace(/^\./, "");
const camel = (s: string) => s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
/** protoc's name for a map field's entry message. */
const mapEntryName = (field: string) => camel(field).replace(/^./, (c) => c.toUpperCase()) + "Entry";

function fieldType(f: protobuf.Field): { type: number; typeName?: string } {
  if (f.resolvedType instanceof protobuf.Enum) return { type: TYPE_ENUM, typeName: f.resolvedType.fullName };
  if (f.resolvedType instanceof protobuf.Type) return { type: TYPE_MESSAGE, typeName: f.resolvedType.fullName };
  const t = SCALAR[f.type];
  if (t === undefined) throw new Error(`reflection: no descriptor type for ${f.type}`);
  return { type: t };
}

function messageProto(t: protobuf.Type): Obj {
  const nested: Obj[] = [];
  const oneofs = t.oneofsArray;
  const fields = t.fieldsArray.map((f) => {
    const base: Obj = { name: f.name, number: f.id, jsonName: camel(f.name) };
    if (f instanceof protobuf.MapField) {
      const entry = mapEntryName(f.name);
      const value = fieldType(f);
      nested.push({
        name: entry,
        field: [
          { name: "key", number: 1, label: LABEL_OPTIONAL, type: SCALAR[f.keyType], jsonName: "key" },
          { name: "value", number: 2, label: LABEL_OPTIONAL, ...value, jsonName: "value" },
        ],
        options: { mapEntry: true },
      });
      return { ...base, label: LABEL_REPEATED, type: TYPE_MESSAGE, typeName: `${t.fullName}.${entry}` };
    }
    const oneofIndex = f.partOf ? oneofs.indexOf(f.partOf) : -1;
    return { ...base, label: f.repeated ? LABEL_REPEATED : LABEL_OPTIONAL, ...fieldType(f), ...(oneofIndex >= 0 ? { oneofIndex } : {}) };
  });
  for (const n of t.nestedArray) if (n instanceof protobuf.Type) nested.push(messageProto(n));
  return { name: t.name, field: fields, nestedType: nested, oneofDecl: oneofs.map((o) => ({ name: o.name })) };
}

function serviceProto(s: protobuf.Service): Obj {
  return {
    name: s.name,
    method: s.methodsArray.map((m) => ({
      name: m.name,
      inputType: m.resolvedRequestType!.fullName,
      outputType: m.resolvedResponseType!.fullName,
      clientStreaming: !!m.requestStream,
      serverStreaming: !!m.responseStream,
    })),
  };
}

export interface ReflectionIndex {
  /** One encoded ServerReflectionRequest in, one encoded ServerReflectionResponse out. */
  answer(request: Uint8Array): Uint8Array;
}

export function reflectionIndex(): ReflectionIndex {
  const root = new protobuf.Root();
  const members = new Map<string, protobuf.ReflectionObject[]>();
  for (const f of FILES) {
    const before = new Set(root.nestedArray.flatMap(allObjects));
    protobuf.parse(f.text, root, { keepCase: true });
    members.set(
      f.name,
      root.nestedArray
        .flatMap(allObjects)
        .filter((o) => !before.has(o) && (o instanceof protobuf.Type || o instanceof protobuf.Service) && !(o.parent instanceof protobuf.Type)),
    );
  }
  root.resolveAll();

  const encoded = new Map<string, Uint8Array>();
  const bySymbol = new Map<string, string>();
  for (const f of FILES) {
    const objs = members.get(f.name)!;
    const pkg = bare(objs[0]!.parent!.fullName);
    const proto = {
      name: f.name,
      package: pkg,
      dependency: f.deps,
      messageType: objs.filter((o): o is protobuf.Type => o instanceof protobuf.Type).map(messageProto),
      service: objs.filter((o): o is protobuf.Service => o instanceof protobuf.Service).map(serviceProto),
      syntax: "proto3",
    };
    const FDP = descriptor.FileDescriptorProto as unknown as protobuf.Type;
    encoded.set(f.name, FDP.encode(FDP.fromObject(proto)).finish());
    for (const o of objs) {
      bySymbol.set(bare(o.fullName), f.name);
      if (o instanceof protobuf.Service) for (const m of o.methodsArray) bySymbol.set(`${bare(o.fullName)}.${m.name}`, f.name);
      if (o instanceof protobuf.Type) for (const n of o.nestedArray) bySymbol.set(bare(n.fullName), f.name);
    }
  }

  const wire = protobuf.parse(reflectionText as string, { keepCase: true }).root;
  const Req = wire.lookupType("grpc.reflection.v1.ServerReflectionRequest");
  const Res = wire.lookupType("grpc.reflection.v1.ServerReflectionResponse");
  const withDeps = (file: string): Uint8Array[] => {
    const out: string[] = [];
    const visit = (n: string) => {
      if (out.includes(n)) return;
      out.push(n);
      for (const d of FILES.find((f) => f.name === n)!.deps) visit(d);
    };
    visit(file);
    return out.map((n) => encoded.get(n)!);
  };

  return {
    answer(bytes) {
      const req = Req.toObject(Req.decode(checkedInput(bytes)), { oneofs: true }) as Obj & { host?: string; message_request?: string };
      const error = (code: number, message: string) => ({ error_response: { error_code: code, error_message: message } });
      let body: Obj;
      switch (req.message_request) {
        case "list_services":
          body = { list_services_response: { service: [ADS_SERVICE, ...REFLECTION_SERVICES].map((name) => ({ name })) } };
          break;
        case "file_containing_symbol": {
          const sym = String(req.file_containing_symbol).replace(/^\./, "");
          const file = bySymbol.get(sym);
          body = file ? { file_descriptor_response: { file_descriptor_proto: withDeps(file) } } : error(NOT_FOUND, `symbol not found: ${sym}`);
          break;
        }
        case "file_by_filename": {
          const name = String(req.file_by_filename);
          body = encoded.has(name) ? { file_descriptor_response: { file_descriptor_proto: withDeps(name) } } : error(NOT_FOUND, `file not found: ${name}`);
          break;
        }
        case "all_extension_numbers_of_type": {
          const t = String(req.all_extension_numbers_of_type);
          body = bySymbol.has(t) ? { all_extension_numbers_response: { base_type_name: t, extension_number: [] } } : error(NOT_FOUND, `type not found: ${t}`);
          break;
        }
        case "file_containing_extension":
          body = error(NOT_FOUND, "no extensions are registered");
          break;
        default:
          body = error(UNIMPLEMENTED, "empty or unknown reflection request");
      }
      return Res.encode(Res.fromObject({ valid_host: req.host ?? "", original_request: Req.decode(bytes), ...body })).finish();
    },
  };
}

function allObjects(o: protobuf.ReflectionObject): protobuf.ReflectionObject[] {
  const nested = (o as protobuf.Namespace).nestedArray ?? [];
  return [o, ...nested.flatMap(allObjects)];
}
