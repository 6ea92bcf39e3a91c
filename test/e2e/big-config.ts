// The large configuration pushed while the agent gets SIGTERM: BIG_CLUSTERS STATIC clusters whose
// metadata carries a generation and a pad derived from (name, generation), ~300 KiB per response.
// A client can then tell a whole response from a truncated, spliced or corrupted one: every
// resource must decode, every pad must match, and all clusters of one response share one
// generation. Fake istiod sends the encoded form; local mode writes the YAML/JSON form.

import type { AnyResource } from "../support/fake-istiod.ts";
import { CLUSTER, decodeResource, encode } from "./envoy-resources.ts";

export const BIG_CLUSTERS = 6;
const PAD_BYTES = 50_000;

export function padFor(name: string, gen: number): string {
  const unit = `${name}@${gen};`;
  return unit.repeat(Math.ceil(PAD_BYTES / unit.length)).slice(0, PAD_BYTES);
}

const names = () => Array.from({ length: BIG_CLUSTERS }, (_, i) => `big-${i}`);

/** Envoy's YAML/JSON form, as a LOCAL_XDS_PATH file holds it. */
export function bigClusters(gen: number): Record<string, unknown>[] {
  return names().map((name) => ({ name, type: "STATIC", connect_timeout: "1s", metadata: { filter_metadata: { e2e: { gen, pad: padFor(name, gen) } } } }));
}

/** The same clusters as protobuf Any resources, as istiod sends them. */
export function encodedBigClusters(gen: number): AnyResource[] {
  return names().map((name) => ({
    typeUrl: CLUSTER,
    name,
    value: encode("envoy.config.cluster.v3.Cluster", {
      name,
      type: "STATIC",
      connect_timeout: { seconds: 1 },
      metadata: { filter_metadata: { e2e: { fields: { gen: { numberValue: gen }, pad: { stringValue: padFor(name, gen) } } } } },
    }),
  }));
}

type StructValue = { numberValue?: number; stringValue?: string };
type DecodedCluster = { name?: string; metadata?: { filter_metadata?: Record<string, { fields?: Record<string, StructValue> }> } };

/** Check one response's resources; `gen` is the big-config generation if they carry one. */
export function checkResources(typeUrl: string, resources: { typeUrl: string; value: Uint8Array }[]): { gen?: number; problem?: string } {
  const gens = new Set<number>();
  const seen: string[] = [];
  for (const [i, r] of resources.entries()) {
    if (r.typeUrl !== typeUrl) return { problem: `resource ${i}: Any type ${r.typeUrl} in a ${typeUrl} response` };
    let msg: Record<string, unknown>;
    try {
      msg = decodeResource(r.typeUrl, r.value);
    } catch (e) {
      return { problem: `resource ${i} (${r.value.length} bytes) does not decode as ${typeUrl}: ${(e as Error).message}` };
    }
    if (typeUrl !== CLUSTER) continue;
    const c = msg as DecodedCluster;
    const fields = c.metadata?.filter_metadata?.e2e?.fields;
    if (!fields) continue;
    const gen = fields.gen?.numberValue ?? NaN;
    if (fields.pad?.stringValue !== padFor(c.name ?? "", gen))
      return { problem: `cluster ${c.name}: pad for generation ${gen} is corrupted (${fields.pad?.stringValue?.length ?? 0} chars)` };
    gens.add(gen);
    seen.push(c.name ?? "");
  }
  if (gens.size === 0) return {};
  if (gens.size > 1) return { problem: `one response mixes generations ${[...gens].join(", ")}` };
  if (seen.sort().join() !== names().join()) return { problem: `big clusters ${seen.join(",")} instead of ${names().join(",")}` };
  return { gen: [...gens][0]! };
}
