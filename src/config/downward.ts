// Kubernetes downward-API files as Istio reads them (./etc/istio/pod/labels and
// ./etc/istio/pod/annotations): one `key="Go-quoted value"` per line. Lines without `=` are
// skipped; a value that is not a valid Go quoted string is an error naming the line, like Istio's
// ParseDownwardAPI.

import { goQuote, goUnquote, QuoteError } from "../lib/strconv.ts";

export const POD_LABELS_PATH = "./etc/istio/pod/labels";
export const POD_ANNOTATIONS_PATH = "./etc/istio/pod/annotations";

export class DownwardApiError extends Error {
  override name = "DownwardApiError";
  constructor(
    readonly source: string,
    readonly line: number,
    message: string,
  ) {
    super(`${source}:${line}: ${message}`);
  }
}

/** Parse downward-API text. `source` names the file in errors. */
export function parseDownwardApi(text: string, source = "downward API file"): Record<string, string> {
  const out: Record<string, string> = {};
  text.split("\n").forEach((line, i) => {
    const eq = line.indexOf("=");
    if (eq < 0) return;
    const key = line.slice(0, eq);
    const raw = line.slice(eq + 1);
    try {
      out[key] = goUnquote(raw);
    } catch (e) {
      if (e instanceof QuoteError) throw new DownwardApiError(source, i + 1, `failed to unquote ${raw}: ${e.message}`);
      throw e;
    }
  });
  return out;
}

/** The file form Kubernetes writes (`key="value"` lines, sorted by key). */
export function formatDownwardApi(values: Record<string, string>): string {
  return Object.keys(values)
    .sort()
    .map((k) => `${k}=${goQuote(values[k]!)}\n`)
    .join("");
}
