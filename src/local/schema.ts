// The schemas local mode encodes with: our own minimal .proto files (proto/local-*.proto,
// Envoy's public package names and field numbers), embedded at bundle time and parsed into one
// protobufjs Root per caller (the server keeps its own; no module-level state). The .proto texts
// are parsed when the agent is bundled (a macro, schema-tree.ts); at run time the Root is rebuilt
// from that JSON, several times faster than parsing the texts. Only the file's conversion
// (convertchild.ts, in a short-lived child process) loads this; the serving process does not.

import protobuf from "protobufjs";
import { localSchemaTree } from "./schema-tree.ts" with { type: "macro" };

/** The schemas as protobufjs JSON, parsed from the .proto texts at bundle time (schema-tree.ts). */
const LOCAL_SCHEMA_JSON: string = localSchemaTree();

export {
  TYPE_URL_PREFIX,
  RESOURCE_KINDS,
  type ResourceKind,
  LISTENER_TYPE,
  ROUTE_TYPE,
  CLUSTER_TYPE,
  ENDPOINT_TYPE,
  SECRET_TYPE,
  typeUrlOf,
  shortType,
  isWildcardType,
} from "./kinds.ts";

/** Every local-mode schema in a fresh Root. Field names keep Envoy's snake_case. */
export function localSchema(): protobuf.Root {
  const root = protobuf.Root.fromJSON(JSON.parse(LOCAL_SCHEMA_JSON) as protobuf.INamespace);
  root.resolveAll();
  return root;
}
