// What an operator gets wrong with the two files the CA connection needs: the root certificate
// (not PEM, not a CA, expired) and the bearer token (missing, not a JWT, expired, wrong audience).
// Pure: text in, findings out. Used at start (a warning naming the file) and by `agent doctor`.

import { X509Certificate } from "node:crypto";
import { pemBlocks } from "./pem.ts";
import { errorMessage } from "../lib/errors.ts";

/** The audience istiod's CA expects on the token by default (Istio's TOKEN_AUDIENCE "istio-ca"). */
export const DEFAULT_TOKEN_AUDIENCE = "istio-ca";

export interface RootFacts {
  subject: string;
  notAfter: number;
  isCa: boolean;
}

/**
 * The certificates of a root bundle, or why it is unusable. `path` names the file in the message.
 * Certificates that are not CAs or have expired are reported by `rootProblem`, not here.
 */
export function parseRootBundle(path: string, bytes: Buffer | string): { certs: RootFacts[] } | { error: string } {
  const text = typeof bytes === "string" ? bytes : bytes.toString("latin1");
  const blocks = pemBlocks(text, "CERTIFICATE");
  if (blocks.length === 0) {
    const der = typeof bytes !== "string" && bytes[0] === 0x30;
    return {
      error: `root certificate ${path} is not PEM (no "-----BEGIN CERTIFICATE-----" block${der ? "; it looks like DER: convert it with \`openssl x509 -inform der -in FILE -out FILE.pem\`" : ""})`,
    };
  }
  const certs: RootFacts[] = [];
  for (const [i, b] of blocks.entries()) {
    try {
      const c = new X509Certificate(b);
      certs.push({ subject: c.subject.replace(/\n/g, ", "), notAfter: Date.parse(c.validTo), isCa: c.ca });
    } catch (e) {
      return { error: `root certificate ${path}: PEM block ${i + 1} is not a valid certificate (${errorMessage(e)})` };
    }
  }
  return { certs };
}

/** Why a root bundle cannot be trusted as the mesh's root (not PEM, no CA, expired), or undefined. */
export function rootProblem(path: string, bytes: Buffer | string, nowMs: number): string | undefined {
  const parsed = parseRootBundle(path, bytes);
  if ("error" in parsed) return parsed.error;
  const first = parsed.certs[0]!;
  if (!parsed.certs.some((c) => c.isCa))
    return `root certificate ${path} (${first.subject}) is not a CA certificate (basicConstraints CA:FALSE): this is a leaf, not the mesh's root`;
  const live = parsed.certs.filter((c) => c.notAfter > nowMs);
  if (live.length === 0) return `root certificate ${path} (${first.subject}) expired on ${new Date(first.notAfter).toISOString()}`;
  return undefined;
}

export interface TokenFacts {
  /** Expiry (ms since the epoch), when the token has a numeric `exp`. */
  exp?: number;
  audiences: string[];
}

/** The claims of a JWT (unverified: only its issuer can verify it), or why the text is not one. */
export function parseJwt(text: string): TokenFacts | { error: string } {
  const parts = text.trim().split(".");
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]*$/.test(p)) || parts[1]!.length > 16 * 1024) {
    return { error: "is not a JWT (three base64url parts separated by dots)" };
  }
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"));
  } catch {
    return { error: "is not a JWT (its payload is not JSON)" };
  }
  if (claims === null || typeof claims !== "object") return { error: "is not a JWT (its payload is not a JSON object)" };
  const c = claims as { exp?: unknown; aud?: unknown };
  const audiences = typeof c.aud === "string" ? [c.aud] : Array.isArray(c.aud) ? c.aud.filter((a): a is string => typeof a === "string") : [];
  return { ...(typeof c.exp === "number" && Number.isFinite(c.exp) ? { exp: c.exp * 1000 } : {}), audiences };
}

/**
 * What is wrong with the token file's content for a CA that wants `audience`: missing (undefined
 * or empty), not a JWT, expired. The audience is left to `agent doctor` (a cluster may configure
 * another one). Never includes the token itself.
 */
export function tokenProblem(path: string, text: string | undefined, nowMs: number): string | undefined {
  if (text === undefined || text.trim() === "") return `token file ${path} is ${text === undefined ? "missing" : "empty"}`;
  const jwt = parseJwt(text);
  if ("error" in jwt) return `token file ${path} ${jwt.error}`;
  if (jwt.exp !== undefined && jwt.exp <= nowMs) return `token file ${path} expired at ${new Date(jwt.exp).toISOString()} (its exp claim)`;
  return undefined;
}

/**
 * Why a client certificate chain (PROV_CERT, or the istiod connection's) cannot authenticate: its
 * leaf unreadable or expired, or undefined. As Istio's pilot/pkg/grpc/tls.go, such a certificate
 * is left out and the connection goes on the token.
 */
export function clientCertProblem(pem: Buffer, nowMs: number): string | undefined {
  const leaf = pemBlocks(pem.toString("utf8"), "CERTIFICATE")[0];
  if (!leaf) return "holds no certificate";
  let notAfter: number;
  try {
    notAfter = Date.parse(new X509Certificate(leaf).validTo);
  } catch (e) {
    return `cannot be parsed (${errorMessage(e)})`;
  }
  return nowMs > notAfter ? `expired at ${new Date(notAfter).toISOString()}` : undefined;
}
