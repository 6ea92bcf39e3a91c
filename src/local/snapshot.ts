// A snapshot: every resource a local xDS file defines, encoded, per type URL, with content
// versions. A resource's version is a hash of its bytes, so an unchanged resource keeps its
// version across reloads (and agent restarts) and "what changed" is a comparison of versions.

import { createHash } from "node:crypto";

export interface Resource {
  name: string;
  /** Hash of `body`: equal bytes, equal version. */
  version: string;
  /** The encoded message (the value of its google.protobuf.Any). */
  body: Uint8Array;
}

export interface Snapshot {
  /** Hash over every resource of every type; names the whole file's content in logs. */
  version: string;
  /** type URL -> name -> resource (names sorted). */
  types: ReadonlyMap<string, ReadonlyMap<string, Resource>>;
}

export function hashHex(parts: Iterable<string | Uint8Array>, len = 12): string {
  const h = createHash("sha256");
  for (const p of parts) {
    h.update(p);
    h.update("\0");
  }
  return h.digest("hex").slice(0, len);
}

export function makeResource(name: string, body: Uint8Array): Resource {
  return { name, body, version: hashHex([body]) };
}

/** Build a snapshot from per-type resource lists. */
export function makeSnapshot(byType: Map<string, Resource[]>): Snapshot {
  const types = new Map<string, Map<string, Resource>>();
  const parts: string[] = [];
  for (const [typeUrl, list] of [...byType].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const m = new Map<string, Resource>();
    for (const r of [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      m.set(r.name, r);
      parts.push(`${typeUrl}|${r.name}|${r.version}`);
    }
    types.set(typeUrl, m);
  }
  return { version: hashHex(parts), types };
}

export const EMPTY_SNAPSHOT: Snapshot = makeSnapshot(new Map());

/** Resources of one type, by name (empty map when the type has none). */
export function resourcesOf(s: Snapshot, typeUrl: string): ReadonlyMap<string, Resource> {
  return s.types.get(typeUrl) ?? new Map();
}

/** A SotW version for a set of resources: hash of their names and versions. */
export function setVersion(resources: readonly Resource[]): string {
  return hashHex(resources.map((r) => `${r.name}|${r.version}`));
}

export interface TypeChange {
  typeUrl: string;
  changed: string[];
  removed: string[];
}

/** What differs between two snapshots, per type (types without changes omitted). */
export function diffSnapshots(before: Snapshot, after: Snapshot): TypeChange[] {
  const out: TypeChange[] = [];
  const urls = new Set([...before.types.keys(), ...after.types.keys()]);
  for (const typeUrl of [...urls].sort()) {
    const a = resourcesOf(before, typeUrl);
    const b = resourcesOf(after, typeUrl);
    const changed = [...b.values()].filter((r) => a.get(r.name)?.version !== r.version).map((r) => r.name);
    const removed = [...a.keys()].filter((n) => !b.has(n));
    if (changed.length || removed.length) out.push({ typeUrl, changed, removed });
  }
  return out;
}
