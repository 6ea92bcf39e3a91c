// Paths where two JSON values differ, for the differential suites' failure messages and their
// expected-differences tables. A path is dot-separated keys and [index]es from the root.

export interface JsonDifference {
  path: string;
  theirs: unknown;
  ours: unknown;
}

export function jsonDiff(theirs: unknown, ours: unknown, path = "", out: JsonDifference[] = []): JsonDifference[] {
  if (Array.isArray(theirs) && Array.isArray(ours)) {
    const n = Math.max(theirs.length, ours.length);
    for (let i = 0; i < n; i++) jsonDiff(theirs[i], ours[i], `${path}[${i}]`, out);
    return out;
  }
  const obj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  if (obj(theirs) && obj(ours)) {
    for (const k of new Set([...Object.keys(theirs), ...Object.keys(ours)])) jsonDiff(theirs[k], ours[k], path ? `${path}.${k}` : k, out);
    return out;
  }
  if (JSON.stringify(theirs) !== JSON.stringify(ours)) out.push({ path, theirs, ours });
  return out;
}

export const showValue = (v: unknown): string => (v === undefined ? "(absent)" : JSON.stringify(v).slice(0, 300));
