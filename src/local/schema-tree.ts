// A Bun macro (imported `with { type: "macro" }` by schema.ts): parses local mode's .proto texts
// with protobufjs when the agent is bundled and returns the Root as protobufjs JSON, so the
// agent's start does not run the .proto tokenizer. test/local/schema-tree.test.ts checks that the
// Root rebuilt from it equals a fresh parse.

import protobuf from "protobufjs";
import core from "../../proto/local-core.proto" with { type: "text" };
import matcher from "../../proto/local-matcher.proto" with { type: "text" };
import listener from "../../proto/local-listener.proto" with { type: "text" };
import route from "../../proto/local-route.proto" with { type: "text" };
import endpoint from "../../proto/local-endpoint.proto" with { type: "text" };
import cluster from "../../proto/local-cluster.proto" with { type: "text" };
import hcm from "../../proto/local-hcm.proto" with { type: "text" };
import router from "../../proto/local-router.proto" with { type: "text" };
import tcpProxy from "../../proto/local-tcp-proxy.proto" with { type: "text" };
import upstreamHttp from "../../proto/local-upstream-http.proto" with { type: "text" };
import tls from "../../proto/local-tls.proto" with { type: "text" };
import discovery from "../../proto/discovery.proto" with { type: "text" };
import rpcStatus from "../../proto/xds-rpc-status.proto" with { type: "text" };

/** Parse every local-mode .proto text into a fresh Root (keepCase: Envoy's snake_case names). */
export function parseLocalSchemaTexts(): protobuf.Root {
  const root = new protobuf.Root();
  for (const f of ["any", "duration", "struct", "wrappers", "empty"]) root.addJSON(protobuf.common.get(`google/protobuf/${f}.proto`)!.nested!);
  for (const text of [rpcStatus, core, matcher, listener, route, endpoint, cluster, hcm, router, tcpProxy, upstreamHttp, tls, discovery]) {
    protobuf.parse(text, root, { keepCase: true });
  }
  root.resolveAll();
  return root;
}

export function localSchemaTree(): string {
  return JSON.stringify(parseLocalSchemaTexts().toJSON());
}
