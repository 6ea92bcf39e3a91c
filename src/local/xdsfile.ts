// The local xDS file: YAML (or JSON) with up to five top-level lists — `listeners`, `routes`,
// `clusters`, `endpoints`, `secrets` — each holding resources in Envoy's proto-JSON/YAML form
// (snake_case or camelCase field names, `@type` inside typed_config Any fields). Parsing is pure:
// text in, an encoded Snapshot out, or one LocalXdsError naming the file and the resource.

import YAML from "yaml";
import { LocalXdsError } from "./errors.ts";
import { ProtoJson, ProtoJsonError } from "./protojson.ts";
import { RESOURCE_KINDS, typeUrlOf } from "./kinds.ts";
import { makeResource, makeSnapshot, type Resource, type Snapshot } from "./snapshot.ts";

const KEYS: readonly string[] = RESOURCE_KINDS.map((k) => k.key);

function parseDocument(path: string, text: string): unknown {
  const doc = YAML.parseDocument(text, { prettyErrors: false, uniqueKeys: true });
  const err = doc.errors[0];
  if (err) {
    const offset = err.pos[0];
    const before = text.slice(0, offset).split("\n");
    const where = `line ${before.length}, column ${before.at(-1)!.length + 1}: `;
    throw new LocalXdsError(`${path}: ${where}not valid YAML/JSON: ${err.message.split("\n")[0]}`, path);
  }
  return doc.toJS({ maxAliasCount: 100 });
}

/**
 * Parse and encode a local xDS file. `path` is only used in messages (as the user wrote it).
 * Throws LocalXdsError: `<path>: clusters[2] "foo": unknown field "lbPolicyy" in ...`.
 */
export function parseXdsFile(path: string, text: string, pj: ProtoJson): Snapshot {
  const doc = parseDocument(path, text);
  if (doc === null || doc === undefined) return makeSnapshot(new Map());
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new LocalXdsError(`${path}: want a mapping with ${KEYS.join(", ")} lists at the top level`, path);
  }
  for (const key of Object.keys(doc)) {
    if (!KEYS.includes(key)) throw new LocalXdsError(`${path}: unknown top-level key "${key}" (want ${KEYS.join(", ")})`, path);
  }
  const byType = new Map<string, Resource[]>();
  for (const kind of RESOURCE_KINDS) {
    const list = (doc as Record<string, unknown>)[kind.key];
    const typeUrl = typeUrlOf(kind);
    const out: Resource[] = [];
    byType.set(typeUrl, out);
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) throw new LocalXdsError(`${path}: ${kind.key}: want a list of ${kind.message}, got ${typeof list}`, path);
    const seen = new Map<string, number>();
    list.forEach((item, i) => {
      let label = `${kind.key}[${i}]`;
      const fail = (msg: string, cause?: unknown): never => {
        throw new LocalXdsError(`${path}: ${label}: ${msg}`, path, label, cause === undefined ? undefined : { cause });
      };
      if (item === null || typeof item !== "object" || Array.isArray(item)) fail(`want an object (${kind.message})`);
      const { "@type": declared, ...fields } = item as Record<string, unknown>;
      const name = fields[kind.nameField] ?? fields[kind.nameField === "name" ? "name" : "clusterName"];
      if (typeof name !== "string" || !name) fail(`missing "${kind.nameField}"`);
      label = `${kind.key}[${i}] ${JSON.stringify(name)}`;
      if (declared !== undefined && declared !== typeUrl) fail(`"@type" is ${JSON.stringify(declared)} but ${kind.key} hold ${typeUrl}`);
      const dup = seen.get(name as string);
      if (dup !== undefined) fail(`duplicate name (also ${kind.key}[${dup}])`);
      seen.set(name as string, i);
      try {
        out.push(makeResource(name as string, pj.encode(kind.message, fields)));
      } catch (e) {
        if (e instanceof ProtoJsonError) fail(e.message, e);
        throw e;
      }
    });
  }
  return makeSnapshot(byType);
}
