// Registry credentials and challenges for OCI pulls. The pull secret istiod puts in the VM env is
// a docker config JSON ({"auths": {"<registry>": {"auth"|"username"/"password"|...}}}), read as
// go-containerregistry's keychain reads it (Docker Hub under https://index.docker.io/v1/). Every
// realm in a 401's WWW-Authenticate is checked before anything follows it (Istio's
// validateAllRealms): http(s) only, never localhost, metadata.google.internal, or an
// unspecified, private, loopback or link-local IP literal in any spelling (0.0.0.0, IPv4-mapped
// IPv6 such as [::ffff:127.0.0.1], which the URL parser rewrites to [::ffff:7f00:1]).

import { isIP } from "node:net";
import { DEFAULT_REGISTRY } from "./oci-reference.ts";
import { rangeList } from "./ssrf.ts";
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

const LOCAL_RANGES = rangeList([
  "0.0.0.0/8",
  "10.0.0.0/8",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "::/128",
  "::1/128",
  "fc00::/7",
  "fe80::/10",
]);

/** The IPv4 address an IPv4-mapped or -compatible IPv6 address carries, in either spelling (::ffff:7f00:1, ::ffff:127.0.0.1). */
function embeddedIpv4(ip6: string): string | undefined {
  const l = ip6.toLowerCase();
  const dotted = /^::(?:ffff:)?(\d+\.\d+\.\d+\.\d+)$/.exec(l);
  if (dotted) return dotted[1];
  const hex = /^::(?:ffff:)?([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(l);
  if (!hex) return undefined;
  const hi = parseInt(hex[1]!, 16);
  const lo = parseInt(hex[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/**
 * Unspecified, loopback, private (RFC 1918, fc00::/7) or link-local: an address that reaches this
 * host or its network. IPv4 carried in IPv6 (mapped or compatible, hex or dotted) is judged as IPv4.
 */
function isPrivateOrLoopback(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return LOCAL_RANGES.check(ip, "ipv4");
  if (family !== 6) return false;
  const v4 = embeddedIpv4(ip);
  if (v4 !== undefined && isIP(v4) === 4) return LOCAL_RANGES.check(v4, "ipv4");
  return LOCAL_RANGES.check(ip, "ipv6");
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
  const name = host.toLowerCase().replace(/\.$/, "");
  if (name === "localhost" || name.endsWith(".localhost")) throw new RegistryAuthError("realm targets localhost");
  if (isPrivateOrLoopback(host)) throw new RegistryAuthError(`realm targets private/loopback/link-local IP ${host}`);
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
