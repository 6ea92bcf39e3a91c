// COMPLIANCE_POLICY for the agent's own TLS (to istiod and to the CA), as Istio's
// EnforceGoCompliance (pkg/model/fips.go) restricts pilot-agent's gRPC clients; Envoy gets the
// same policy through its bootstrap. Always at least TLS 1.2 (Istio's getTLSConfig).
//   fips-140-2: TLS 1.2 only, the four ECDHE AES-GCM suites, curve P-256
//   fips-140-3: TLS 1.2-1.3, the same TLS 1.2 suites, curves P-256 and P-384
//   pqc:        TLS 1.3 only, AES-GCM suites, X25519MLKEM768
// An unknown value keeps the defaults, with a warning naming it (Istio: "unknown compliance policy").

import type { SecureVersion } from "node:tls";

export interface ComplianceTls {
  minVersion: SecureVersion;
  maxVersion?: SecureVersion;
  /** OpenSSL cipher list (TLS 1.2 suites; TLS 1.3 suite names where the policy names them). */
  ciphers?: string;
  ecdhCurve?: string;
}

/** Istio's fipsGoCiphers, in OpenSSL names. */
export const FIPS_TLS12_CIPHERS = [
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
];

export const COMPLIANCE_POLICIES = ["fips-140-2", "fips-140-3", "pqc"] as const;

/** TLS options for a client connection under `policy` (COMPLIANCE_POLICY). */
export function complianceTls(policy: string): ComplianceTls {
  switch (policy) {
    case "fips-140-2":
      return { minVersion: "TLSv1.2", maxVersion: "TLSv1.2", ciphers: FIPS_TLS12_CIPHERS.join(":"), ecdhCurve: "P-256" };
    case "fips-140-3":
      return { minVersion: "TLSv1.2", maxVersion: "TLSv1.3", ciphers: FIPS_TLS12_CIPHERS.join(":"), ecdhCurve: "P-256:P-384" };
    case "pqc":
      return { minVersion: "TLSv1.3", ciphers: "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384", ecdhCurve: "X25519MLKEM768" };
    default:
      return { minVersion: "TLSv1.2" };
  }
}

/** A warning for a value Istio does not know, or undefined. */
export function compliancePolicyProblem(policy: string): string | undefined {
  if (policy === "" || (COMPLIANCE_POLICIES as readonly string[]).includes(policy)) return undefined;
  return `COMPLIANCE_POLICY="${policy}" is not one of ${COMPLIANCE_POLICIES.join(", ")}: unknown compliance policy, TLS defaults used`;
}
