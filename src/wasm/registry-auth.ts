// Registry credentials and challenges for OCI pulls. The pull secret istiod puts in the VM env is
// a docker config JSON ({"auths": {"<registry>": {"auth"|"username"/"password"|...}}}), read as
// go-containerregistry's keychain reads it (Docker Hub under https://index.docker.io/v1/). Every
// realm in a 401's WWW-Authenticate is checked before anything follows it (Istio's
// validateAllRealms): http(s) only, never localhost, metadata.google.internal, or a
// private/loopback/link-local IP literal.

import { isIP } from "node:net";
import { DEFAULT_REGISTRY } from "./oci-reference.ts";
import { errorMessage } from "../lib/errors.ts";

export class RegistryAuthError extends Error {
  override name = "RegistryAuthError";
}

export type Credentials =
  { kind: "anonymous" } | { kind: "basic"; username: string; password: string } | { kind: "token"; identityToken?: string; registryToken?: string };

const DOCKER_HUB_KEY = "https://index.docker.io/v1/";

function hostOfKey(k: string): string {
  return k.replace(/^https?:\/\//, "").replace(/\/.*$/, "");
}

/** Credentials for `registry` from a docker config JSON; anonymous when it has none for it. */
export function credentialsFor(pullSecret: Uint8Array | undefined, registry: string): Credentials {
  if (!pullSecret) return { kind: "anonymous" };
  const text = new TextDecoder().decode(pullSecret);
  if (text.trim() === "null") throw new RegistryAuthError("image pull secret is null");
  let cfg: { auths?: Record<string, Record<string, string>> };
  try {
    cfg = JSON.parse(text) as typeof cfg;
  } catch (e) {
    throw new RegistryAuthError(`image pull secret is not a docker config JSON: ${errorMessage(e)}`, { cause: e });
  }
  if (cfg === null || typeof cfg !== "object") throw new RegistryAuthError("image pull secret is not a docker config JSON object");
  const auths = cfg.auths ?? {};
  const want = registry === DEFAULT_REGISTRY ? DOCKER_HUB_KEY : registry;
  const entry = auths[want] ?? Object.entries(auths).find(([k]) => hostOfKey(k) === hostOfKey(want))?.[1];
  if (!entry) return { kind: "anonymous" };
  if (entry.identitytoken || entry.registrytoken) return { kind: "token", identityToken: entry.identitytoken, registryToken: entry.registrytoken };
  if (entry.auth) {
    const decoded = Buffer.from(entry.auth, "base64").toString("utf8");
    const i = decoded.indexOf(":");
    if (i < 0) throw new RegistryAuthError(`image pull secret: auth for ${registry} is not base64 of user:password`);
    return { kind: "basic", username: decoded.slice(0, i), password: decoded.slice(i + 1) };
  }
  if (entry.username || entry.password) return { kind: "basic", username: entry.username ?? "", password: entry.password ?? "" };
  return { kind: "anonymous" };
}

function isPrivateOrLoopbackOrLinkLocal(ip: string): boolean {
  if (isIP(ip) === 4) {
    const [a, b] = ip.split(".").map(Number) as [number, number];
    return a === 10 || a === 127 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254);
  }
  const l = ip.toLowerCase();
  if (l === "::1") return true;
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(l);
  if (m) return isPrivateOrLoopbackOrLinkLocal(m[1]!);
  const first = parseInt(l.split(":")[0] || "0", 16);
  return (first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfe80;
}

export function validateRealmUrl(realm: string): void {
  let u: URL;
  try {
    u = new URL(realm);
  } catch {
    throw new RegistryAuthError(`realm scheme "" not allowed (realm ${JSON.stringify(realm)})`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new RegistryAuthError(`realm scheme "${u.protocol.replace(/:$/, "")}" not allowed`);
  const host = u.hostname.replace(/^\[|\]$/g, "");
  if (host === "") throw new RegistryAuthError("realm missing host");
  if (host === "metadata.google.internal") throw new RegistryAuthError("realm targets cloud metadata service");
  if (host === "localhost") throw new RegistryAuthError("realm targets localhost");
  if (isIP(host) && isPrivateOrLoopbackOrLinkLocal(host)) throw new RegistryAuthError("realm targets private/loopback/link-local IP");
}

/** Check every realm="..." in a WWW-Authenticate value; throws on the first unsafe one. */
export function validateAllRealms(wwwAuth: string): void {
  let rest = wwwAuth;
  for (;;) {
    const i = rest.indexOf('realm="');
    if (i < 0) return;
    rest = rest.slice(i + 7);
    const end = rest.indexOf('"');
    if (end < 0) return;
    validateRealmUrl(rest.slice(0, end));
    rest = rest.slice(end + 1);
  }
}

export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/** The first challenge of a WWW-Authenticate value: scheme and its key="value" parameters. */
export function parseChallenge(value: string): Challenge {
  const m = /^\s*(\S+)\s*(.*)$/s.exec(value);
  const scheme = (m?.[1] ?? "").toLowerCase();
  const params: Record<string, string> = {};
  const re = /(\w+)=(?:"([^"]*)"|([^,\s]*))/g;
  for (let p = re.exec(m?.[2] ?? ""); p; p = re.exec(m?.[2] ?? "")) params[p[1]!.toLowerCase()] ??= p[2] ?? p[3] ?? "";
  return { scheme, params };
}
