// CREDENTIAL_FETCHER_TYPE -> where the bearer token for the CA and istiod comes from (Istio's
// credentialfetcher.NewCredFetcher). JWT (or empty) keeps the existing token-file path untouched:
// this returns undefined and the CA client and xDS relay read the file as before.

import { resolve } from "node:path";
import type { TokenSource } from "../ca/token.ts";
import { ISTIO_TOKEN_PATH } from "../ca/token.ts";
import type { AgentConfig } from "../config/agentconfig.ts";
import type { Logger } from "../lib/log.ts";
import { fetchMetadata, type MetadataHttp } from "../platform/http.ts";
import { GceMetadataClient } from "../platform/gcemetadata.ts";
import { CredentialError, GceCredentialFetcher } from "./gce.ts";

export { CredentialError, GceCredentialFetcher, GCE_TOKEN_GRACE_MS } from "./gce.ts";

export interface CredentialDeps {
  log: Logger;
  /** Wall clock (ms since the epoch). */
  now(): number;
  http?: MetadataHttp;
}

/** Istio's "Mock" fetcher (tests only): always `test_token`. */
const MOCK: TokenSource = { describe: "mock credential fetcher", token: async () => "test_token" };

export function credentialFetcherFor(cfg: AgentConfig, deps: CredentialDeps): TokenSource | undefined {
  const type = cfg.env.CREDENTIAL_FETCHER_TYPE;
  switch (type) {
    case "":
    case "JWT":
      return undefined;
    case "GoogleComputeEngine": {
      const client = new GceMetadataClient(
        { http: deps.http ?? fetchMetadata, readSystemFile: () => undefined, lookupHost: () => Promise.reject(new Error("unused")) },
        cfg.env.GCE_METADATA_HOST,
      );
      deps.log.info(
        `using credential fetcher of GoogleComputeEngine type in ${cfg.env.TRUST_DOMAIN} trust domain (identity provider ${cfg.env.CREDENTIAL_IDENTITY_PROVIDER})`,
      );
      return new GceCredentialFetcher({
        audience: cfg.env.TRUST_DOMAIN,
        jwtPath: resolve(cfg.root, ISTIO_TOKEN_PATH),
        metadataGet: (suffix) => client.get(suffix),
        now: deps.now,
        log: deps.log,
      });
    }
    case "Mock":
      return MOCK;
    default:
      throw new CredentialError(`CREDENTIAL_FETCHER_TYPE: invalid credential fetcher type "${type}" (want JWT, GoogleComputeEngine or Mock)`);
  }
}
