// GODEBUG as Istio's injector sets it: with COMPLIANCE_POLICY=fips-140-3 it adds
// GODEBUG=fips140=only, which puts Go's crypto (pilot-agent's own TLS) into FIPS-only mode. The
// agent has no Go crypto; fips140=only is read as the compliance policy it stands for, so the
// agent's and Envoy's TLS follow COMPLIANCE_POLICY's rules even when only GODEBUG is set.

/** The compliance policy GODEBUG implies, if any (`fips140=only` => `fips-140-3`). */
export function compliancePolicyFromGodebug(godebug: string | undefined): string | undefined {
  for (const item of (godebug ?? "").split(",")) {
    const [k, v] = item.split("=").map((s) => s.trim());
    if (k === "fips140" && v === "only") return "fips-140-3";
  }
  return undefined;
}
