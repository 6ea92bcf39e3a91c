// Local mode's schemas, parsed at bundle time by a macro and rebuilt from JSON at run time, are
// the same as a fresh parse of the .proto texts, and encode the same bytes.

import { expect, test } from "bun:test";
import { localSchema } from "../../src/local/schema.ts";
import { parseLocalSchemaTexts } from "../../src/local/schema-tree.ts";

test("the Root rebuilt from the inlined JSON equals a fresh parse", () => {
  expect(localSchema().toJSON()).toEqual(parseLocalSchemaTexts().toJSON());
});

test("both encode a Cluster to the same bytes", () => {
  const msg = {
    name: "c",
    type: 3,
    connect_timeout: { seconds: 1 },
    eds_cluster_config: { service_name: "c", eds_config: { ads: {}, resource_api_version: 2 } },
  };
  const a = localSchema().lookupType("envoy.config.cluster.v3.Cluster");
  const b = parseLocalSchemaTexts().lookupType("envoy.config.cluster.v3.Cluster");
  const bytes = a.encode(a.fromObject(msg)).finish();
  expect(bytes.length).toBeGreaterThan(5);
  expect(Buffer.from(bytes)).toEqual(Buffer.from(b.encode(b.fromObject(msg)).finish()));
});
