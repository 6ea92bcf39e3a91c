// The Security Token Service on `--stsPort`, built from the agent's config: where it listens (as
// Istio's initStsServer chose), which token manager plugin answers (`--tokenManagerPlugin`, ""
// meaning GoogleTokenExchange, the default of the Istio releases that had the service), and what
// that plugin needs (trust domain, identity provider, the GCP project number from the platform).

import type { AgentConfig } from "../config/agentconfig.ts";
import type { PlatformInfo } from "../config/metadata.ts";
import type { LogSink } from "../lib/log.ts";
import { GCP_KEYS } from "../platform/gcp.ts";
import type { CloudCallOptions } from "./cloudcall.ts";
import { GoogleTokenExchange, NO_PLUGIN, type TokenManager } from "./google.ts";
import { StsServer, StsServerError } from "./server.ts";

export { StsServer, StsServerError } from "./server.ts";
export { GoogleTokenExchange, DEFAULT_GOOGLE_ENDPOINTS, type TokenManager } from "./google.ts";

export const GOOGLE_TOKEN_EXCHANGE = "GoogleTokenExchange";

export interface StsSettings {
  host: string;
  port: number;
  plugin: string;
  trustDomain: string;
  identityProvider: string;
  gkeClusterUrlEnv: string;
  federatedTokenEndpoint: string;
  iamCredentialsEndpoint: string;
}

/** Istio's choice: ::1 for an IPv6-only proxy or an IPv6 (not link-local) INSTANCE_IP, else 127.0.0.1. */
export function stsListenHost(ipMode: string, instanceIp: string): string {
  if (ipMode === "ipv6") return "::1";
  const ip = instanceIp.trim();
  if (ip.includes(":") && !/^fe[89ab]/i.test(ip)) return "::1";
  return "127.0.0.1";
}

/** The identity provider Istio's credential fetchers report (GetIdentityProvider). */
function identityProviderOf(cfg: AgentConfig): string {
  switch (cfg.env.CREDENTIAL_FETCHER_TYPE) {
    case "GoogleComputeEngine":
      return cfg.env.CREDENTIAL_IDENTITY_PROVIDER;
    case "Mock":
      return "fakeIDP";
    default:
      return "";
  }
}

export function stsSettingsFrom(cfg: AgentConfig): StsSettings {
  return {
    host: stsListenHost(cfg.node.ipMode, cfg.env.INSTANCE_IP),
    port: cfg.flags.stsPort,
    plugin: cfg.flags.tokenManagerPlugin || GOOGLE_TOKEN_EXCHANGE,
    trustDomain: cfg.env.TRUST_DOMAIN,
    identityProvider: identityProviderOf(cfg),
    gkeClusterUrlEnv: cfg.env.GKE_CLUSTER_URL,
    federatedTokenEndpoint: cfg.env.GOOGLE_STS_ENDPOINT,
    iamCredentialsEndpoint: cfg.env.GOOGLE_IAM_CREDENTIALS_ENDPOINT,
  };
}

export interface StsDeps {
  sink: LogSink;
  /** The discovered platform (its GCP project number and cluster URL). */
  platform: () => Promise<PlatformInfo>;
  /** Wall clock, ms since the epoch. */
  now(): number;
  call?: CloudCallOptions;
}

function checkedUrl(name: string, value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new StsServerError(`${name}: ${JSON.stringify(value)} is not a URL`);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") throw new StsServerError(`${name}: ${JSON.stringify(value)} is not an http(s) URL`);
  return value;
}

/** The token manager for the settings; rejects as Istio's CreateTokenManager did. */
export async function createTokenManager(s: StsSettings, deps: StsDeps): Promise<TokenManager> {
  if (s.plugin !== GOOGLE_TOKEN_EXCHANGE) {
    deps.sink.logger("stsserver").warn(`--tokenManagerPlugin=${s.plugin}: no such plugin; every STS request will fail`);
    return NO_PLUGIN;
  }
  const federatedToken = checkedUrl("GOOGLE_STS_ENDPOINT", s.federatedTokenEndpoint);
  const iamCredentials = checkedUrl("GOOGLE_IAM_CREDENTIALS_ENDPOINT", s.iamCredentialsEndpoint);
  const md = (await deps.platform()).metadata ?? {};
  const projectNumber = md[GCP_KEYS.projectNumber] ?? "";
  if (projectNumber === "") throw new StsServerError(`${GOOGLE_TOKEN_EXCHANGE} token manager specified but failed to ready GCP project information`);
  return new GoogleTokenExchange({
    trustDomain: s.trustDomain,
    identityProvider: s.identityProvider,
    gkeClusterUrlEnv: s.gkeClusterUrlEnv,
    platformClusterUrl: md[GCP_KEYS.clusterUrl] ?? "",
    projectNumber,
    endpoints: { federatedToken, iamCredentials },
    now: deps.now,
    log: deps.sink.logger("token"),
    ...(deps.call ? { call: deps.call } : {}),
  });
}

/** The STS server component of `--stsPort` (the caller starts it only when the port is not 0). */
export function createStsServer(cfg: AgentConfig, deps: StsDeps): StsServer {
  return createStsServerFrom(stsSettingsFrom(cfg), deps);
}

export function createStsServerFrom(s: StsSettings, deps: StsDeps): StsServer {
  return new StsServer({ host: s.host, port: s.port, tokenManager: () => createTokenManager(s, deps), log: deps.sink.logger("stsserver") });
}
