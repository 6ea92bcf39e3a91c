// The Wasm filter schema (proto/wasm-plugin.proto, proto/wasm-core.proto and the google.protobuf
// types they import, from protobufjs' bundled copies), parsed on first use: only a TypedStruct
// Wasm config needs it, to turn its JSON into the typed message.

import type Protobuf from "protobufjs";
import pluginText from "../../proto/wasm-plugin.proto" with { type: "text" };
import coreText from "../../proto/wasm-core.proto" with { type: "text" };
import type { ProtoJson } from "../local/protojson.ts";

const WELL_KNOWN = [
  "google/protobuf/any.proto",
  "google/protobuf/duration.proto",
  "google/protobuf/wrappers.proto",
  "google/protobuf/struct.proto",
  "google/protobuf/empty.proto",
];

export const WASM_MESSAGE = "envoy.extensions.wasm.v3.Wasm";

/** Encodes Wasm filter configs given as proto-JSON (a TypedStruct's value), strictly. */
export class WasmSchema {
  private json: ProtoJson | undefined;

  /** The Wasm message bytes for `json`; throws ProtoJsonError naming the offending field. */
  encodeWasm(json: unknown): Uint8Array {
    // Required here, not imported: protobufjs is loaded only when a TypedStruct Wasm config shows up.
    this.json ??= new (require("../local/protojson.ts") as typeof import("../local/protojson.ts")).ProtoJson(buildRoot());
    return this.json.encode(WASM_MESSAGE, json);
  }
}

function buildRoot(): Protobuf.Root {
  const protobuf = require("protobufjs") as typeof Protobuf;
  const root = new protobuf.Root();
  for (const f of WELL_KNOWN) {
    const common = protobuf.common.get(f) as Protobuf.INamespace | null;
    if (common?.nested) root.addJSON(common.nested);
  }
  protobuf.parse(coreText as string, root, { keepCase: true });
  protobuf.parse(pluginText as string, root, { keepCase: true });
  root.resolveAll();
  return root;
}
