// Types for the parse-prometheus-text-format devDependency (it ships none).
declare module "parse-prometheus-text-format" {
  export interface ParsedSample {
    value?: string;
    labels?: Record<string, string>;
    timestamp_ms?: string;
    buckets?: Record<string, string>;
    quantiles?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  export interface ParsedFamily {
    name: string;
    help: string;
    type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    metrics: ParsedSample[];
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
