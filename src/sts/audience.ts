// The audience of a federated token request: `identitynamespace:<identity namespace>:<provider>`,
// as Istio's GoogleTokenExchange plugin built it. The identity namespace is the subject token's
// only audience (read, not verified), else the trust domain; the provider is the credential
// fetcher's identity provider, else GKE_CLUSTER_URL, else the cluster URL from the platform.

export interface AudienceInputs {
  trustDomain: string;
  /** The credential fetcher's identity provider ("" for the Kubernetes token file). */
  identityProvider: string;
  /** GKE_CLUSTER_URL. */
  gkeClusterUrlEnv: string;
  /** gcp_gke_cluster_url from the platform metadata. */
  platformClusterUrl: string;
}

/** The `aud` claim of a JWT as a list (a string claim is a list of one); undefined when unreadable. */
export function jwtAudiences(token: string): string[] | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || parts[1]!.length > 64 * 1024) return undefined;
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
  const aud = (claims as { aud?: unknown } | null)?.aud;
  if (typeof aud === "string") return [aud];
  if (Array.isArray(aud) && aud.every((a) => typeof a === "string")) return aud as string[];
  return undefined;
}

export interface Audience {
  audience: string;
  /** Set when the trust domain stood in for an unusable token audience (Istio logs it as an error). */
  fallbackReason?: string;
}

export function federatedAudience(subjectToken: string, inp: AudienceInputs): Audience {
  const provider = inp.identityProvider || inp.gkeClusterUrlEnv || inp.platformClusterUrl;
  const auds = jwtAudiences(subjectToken);
  if (auds && auds.length === 1 && auds[0] !== "") return { audience: `identitynamespace:${auds[0]}:${provider}` };
  const found = auds ? JSON.stringify(auds) : "no readable aud claim";
  return {
    audience: `identitynamespace:${inp.trustDomain}:${provider}`,
    fallbackReason: `expect only 1 non-empty audience in token but found ${found}. Fallback to use trust domain "${inp.trustDomain}" as the identity namespace.`,
  };
}
