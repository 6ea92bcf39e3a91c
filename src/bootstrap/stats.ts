// Envoy stats options of the bootstrap (Istio's getStatsOptions): inclusion prefixes, suffixes and
// regexps (annotation, else ProxyConfig.proxyStatsMatcher, plus the ones readiness and draining
// need, `{pod_ip}` expanded to every instance IP), extra stat tags, histogram buckets, and the
// flush/eviction intervals. Bad annotations are reported in `problems` and ignored, as Istio does.

import { formatGoDuration, parseGoDuration } from "../lib/duration.ts";
import { GoStringer, GoStruct } from "./gotemplate/values.ts";
import type { ProxyConfig } from "../config/proxyconfig.ts";
import { errorMessage } from "../lib/errors.ts";

export const ANNOTATION = {
  extraStatTags: "sidecar.istio.io/extraStatTags",
  inclusionPrefixes: "sidecar.istio.io/statsInclusionPrefixes",
  inclusionSuffixes: "sidecar.istio.io/statsInclusionSuffixes",
  inclusionRegexps: "sidecar.istio.io/statsInclusionRegexps",
  histogramBuckets: "sidecar.istio.io/statsHistogramBuckets",
  flushInterval: "sidecar.istio.io/statsFlushInterval",
  evictionInterval: "sidecar.istio.io/statsEvictionInterval",
} as const;

const REQUIRED_PREFIXES = "cluster_manager,listener_manager,server,cluster.xds-grpc,wasm";
const RBAC_SUFFIXES = "rbac.allowed,rbac.denied,shadow_allowed,shadow_denied";
const DRAIN_SUFFIXES = RBAC_SUFFIXES + ",downstream_cx_active";
const REQUIRED_REGEXPS = "vhost\\..*\\.route\\..*";

export interface StatsInputs {
  proxyConfig: ProxyConfig;
  annotations: Record<string, string>;
  instanceIps: string[];
  exitOnZeroActiveConnections: boolean;
}

/** "http.{pod_ip}_" with [10.3.3.3, 10.4.4.4] -> ["http.10.3.3.3_", "http.10.4.4.4_"] */
export function substituteValues(patterns: string[], varName: string, values: string[]): string[] {
  const out: string[] = [];
  for (const p of patterns) {
    if (!p.includes(varName)) out.push(p);
    else for (const v of values) out.push(p.split(varName).join(v));
  }
  return out;
}

function histogramBucket(prefix: string, buckets: number[]): GoStruct {
  const match = new GoStruct("option.HistogramMatch", { Prefix: prefix }, {}, false, { prefix });
  return new GoStruct("option.HistogramBucket", { Match: match, Buckets: buckets }, {}, false, { match: { prefix }, buckets });
}

/** Template parameters for stats; `problems` collects ignored annotations. */
export function statsParams(inp: StatsInputs, problems: string[]): Record<string, unknown> {
  const pc = inp.proxyConfig;
  const ann = inp.annotations;
  const parse = (anno: string | undefined, required: string, fromConfig: string[] | undefined): string[] => {
    let opts: string[] = [];
    if (anno) opts = anno.split(",");
    else if (fromConfig) opts = [...fromConfig];
    if (required) opts.push(...required.split(","));
    return substituteValues(opts, "{pod_ip}", inp.instanceIps);
  };
  const m = pc.proxyStatsMatcher;
  const tags = [...new Set([...(pc.extraStatTags ?? []), ...(ann[ANNOTATION.extraStatTags] ?? "").split(",")].filter((t) => t !== ""))];
  const params: Record<string, unknown> = {};
  const setList = (name: string, v: string[]) => {
    if (v.length > 0) params[name] = v;
  };
  setList("inclusionPrefix", parse(ann[ANNOTATION.inclusionPrefixes], REQUIRED_PREFIXES, m?.inclusionPrefixes));
  setList("inclusionSuffix", parse(ann[ANNOTATION.inclusionSuffixes], inp.exitOnZeroActiveConnections ? DRAIN_SUFFIXES : RBAC_SUFFIXES, m?.inclusionSuffixes));
  setList("inclusionRegexps", parse(ann[ANNOTATION.inclusionRegexps], REQUIRED_REGEXPS, m?.inclusionRegexps));
  setList("extraStatTags", tags);

  let buckets: GoStruct[] | null = null;
  const bucketsAnno = ann[ANNOTATION.histogramBuckets];
  if (bucketsAnno !== undefined) {
    try {
      const parsed = JSON.parse(bucketsAnno) as unknown;
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("want an object of prefix -> [buckets]");
      const entries = Object.entries(parsed as Record<string, unknown>);
      for (const [, v] of entries) {
        if (v !== null && (!Array.isArray(v) || !v.every((x) => typeof x === "number"))) throw new Error("bucket lists must hold numbers");
      }
      buckets = entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([prefix, v]) => histogramBucket(prefix, (v as number[] | null) ?? []));
    } catch (e) {
      problems.push(`annotation ${ANNOTATION.histogramBuckets}: ${errorMessage(e)}; ignored`);
    }
  }
  params.histogram_buckets = buckets;

  let flushNs = 5_000_000_000;
  const flush = ann[ANNOTATION.flushInterval];
  if (flush !== undefined) {
    try {
      const ms = parseGoDuration(flush);
      flushNs = Math.round(ms * 1e6);
      params.stats_flush_interval = new GoStringer(flushNs, formatGoDuration(ms));
    } catch (e) {
      problems.push(`annotation ${ANNOTATION.flushInterval}: ${errorMessage(e)}; ignored`);
    }
  }
  const eviction = ann[ANNOTATION.evictionInterval];
  if (eviction !== undefined) {
    try {
      const ns = Math.round(parseGoDuration(eviction) * 1e6);
      if (flushNs === 0 || ns % flushNs !== 0) {
        problems.push(`annotation ${ANNOTATION.evictionInterval}: ${eviction} must be a multiple of the stats flush interval; ignored`);
      } else {
        params.stats_eviction_interval = `${Math.trunc(ns / 1e9)}s`;
      }
    } catch (e) {
      problems.push(`annotation ${ANNOTATION.evictionInterval}: ${errorMessage(e)}; ignored`);
    }
  }
  return params;
}
