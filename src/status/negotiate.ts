// Content negotiation for the merged scrape. The merge is text concatenation, so only the two
// text formats can flow through it: the Accept header sent on is rewritten to text formats
// (OpenMetrics only towards the application: Envoy's part must stay Prometheus text), and the
// answer's Content-Type follows the application's format. Protobuf is never asked for: a binary
// part would corrupt the page (Istio #60322).

export const FMT_TEXT = "text/plain; version=0.0.4; charset=utf-8";
export const FMT_OPENMETRICS_0_0_1 = "application/openmetrics-text; version=0.0.1; charset=utf-8";
export const FMT_OPENMETRICS_1_0_0 = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT_0_0_4 = "text/plain;version=0.0.4";
const OPENMETRICS = "application/openmetrics-text";

interface MediaRange {
  type: string;
  params: [string, string][];
}

function parseRange(s: string): MediaRange | undefined {
  const [type, ...rest] = s.split(";").map((p) => p.trim());
  if (!type) return undefined;
  const params: [string, string][] = [];
  for (const p of rest) {
    const eq = p.indexOf("=");
    if (eq > 0)
      params.push([
        p.slice(0, eq).trim().toLowerCase(),
        p
          .slice(eq + 1)
          .trim()
          .replace(/^"|"$/g, ""),
      ]);
  }
  return { type: type.toLowerCase(), params };
}

/**
 * The Accept header for a part of the merge. `*`, `* / *` and `text/*` become Prometheus text
 * 0.0.4; `application/*` becomes OpenMetrics 0.0.1 for the application; OpenMetrics is kept for
 * the application only; anything else (protobuf, JSON...) is dropped. Each kept range keeps its
 * q-value. Nothing left means Prometheus text.
 */
export function rewriteAccept(accept: string | null | undefined, part: "envoy" | "app"): string {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const raw of (accept ?? "").split(",")) {
    const r = parseRange(raw);
    if (!r) continue;
    const q = r.params.find(([k]) => k === "q");
    const withQ = (s: string) => {
      base = s;
      return q ? `${s};q=${q[1]}` : s;
    };
    let base = "";
    let v: string | undefined;
    if (r.type === "*" || r.type === "*/*" || r.type === "text/*") v = withQ(TEXT_0_0_4);
    else if (r.type === "text/plain") v = withQ(["text/plain", ...r.params.filter(([k]) => k !== "q").map(([k, x]) => `${k}=${x}`)].join(";"));
    else if (part === "app" && r.type === "application/*") v = withQ(`${OPENMETRICS};version=0.0.1`);
    else if (part === "app" && r.type === OPENMETRICS) v = withQ([OPENMETRICS, ...r.params.filter(([k]) => k !== "q").map(([k, x]) => `${k}=${x}`)].join(";"));
    // The same range twice (e.g. `*/*` after an explicit text/plain) keeps its first q-value.
    if (v && !seen.has(base)) {
      seen.add(base);
      out.push(v);
    }
  }
  return out.length ? out.join(",") : TEXT_0_0_4;
}

export type MetricsFormat = typeof FMT_TEXT | typeof FMT_OPENMETRICS_0_0_1 | typeof FMT_OPENMETRICS_1_0_0;

/** Istio's negotiateMetricsFormat: the format of the application's answer. */
export function negotiateFormat(contentType: string | null | undefined): MetricsFormat {
  const r = contentType ? parseRange(contentType) : undefined;
  if (r?.type === OPENMETRICS) {
    const version = r.params.find(([k]) => k === "version")?.[1] ?? "";
    if (version === "1.0.0") return FMT_OPENMETRICS_1_0_0;
    if (version === "0.0.1" || version === "") return FMT_OPENMETRICS_0_0_1;
  }
  return FMT_TEXT;
}

export function isOpenMetrics(f: MetricsFormat): boolean {
  return f !== FMT_TEXT;
}

/** Several targets: OpenMetrics only if all of them are (the lowest version wins), else text. */
export function combineFormats(formats: MetricsFormat[]): MetricsFormat {
  if (formats.length === 0 || formats.some((f) => f === FMT_TEXT)) return FMT_TEXT;
  return formats.every((f) => f === FMT_OPENMETRICS_1_0_0) ? FMT_OPENMETRICS_1_0_0 : FMT_OPENMETRICS_0_0_1;
}

/** Remove `# EOF` lines (the merge re-adds one at the very end for OpenMetrics). */
export function stripEof(text: string): string {
  return text.replace(/^# EOF[ \t]*(\r?\n|$)/gm, "");
}
