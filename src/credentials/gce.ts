// CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine (Istio's security/pkg/credentialfetcher/plugin/gce.go):
// the VM's identity token from the GCE metadata server,
//   instance/service-accounts/default/identity?audience=<trust domain>&format=full
// written where the Kubernetes token would be (./var/run/secrets/tokens/istio-token, 0640) so
// every reader of that file sees it, and returned for the CA and istiod calls.
//
// Istio fetches on every call; we keep the token until 25 minutes before its `exp` (Istio's
// refresh grace period), and while a refresh fails we keep serving the cached token until it
// expires. The token never reaches a log.

import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { TokenSource } from "../ca/token.ts";
import type { Logger } from "../lib/log.ts";
import { jwtExpiryMs } from "./jwtexp.ts";
import { errorMessage } from "../lib/errors.ts";

/** Istio's gracePeriod: a token this close to expiry is fetched again. */
export const GCE_TOKEN_GRACE_MS = 25 * 60_000;

export class CredentialError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CredentialError";
  }
}

export interface GceFetcherOptions {
  /** The audience: the trust domain, as Istio sets it. */
  audience: string;
  /** Where the token is written (the Kubernetes token path). */
  jwtPath: string;
  /** GET a metadata suffix (computeMetadata/v1/...) and return its body; rejects on failure. */
  metadataGet(suffix: string): Promise<string>;
  /** Wall clock, ms since the epoch. */
  now(): number;
  log: Logger;
  writeToken?: (path: string, token: string) => void;
}

function writeTokenFile(path: string, token: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, token, { mode: 0o640 });
  chmodSync(path, 0o640);
}

export class GceCredentialFetcher implements TokenSource {
  private cached: { token: string; expMs: number | undefined } | undefined;
  private inflight: Promise<string> | undefined;
  /** Fetches made from the metadata server (for tests and the debug log). */
  fetches = 0;

  constructor(private readonly opts: GceFetcherOptions) {}

  get describe(): string {
    return `GCE metadata identity token (audience ${this.opts.audience})`;
  }

  /** CREDENTIAL_IDENTITY_PROVIDER is reported as is; GoogleComputeEngine by default. */
  async token(): Promise<string | undefined> {
    const c = this.cached;
    const now = this.opts.now();
    if (c && c.expMs !== undefined && now <= c.expMs - GCE_TOKEN_GRACE_MS) return c.token;
    try {
      return await this.refresh();
    } catch (e) {
      if (c && c.expMs !== undefined && now < c.expMs) {
        this.opts.log.warn(`GCE identity token refresh failed, using the cached token until it expires: ${errorMessage(e)}`);
        return c.token;
      }
      throw e;
    }
  }

  private refresh(): Promise<string> {
    // Concurrent callers (CSR and xDS at start) share one request.
    this.inflight ??= this.fetch().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async fetch(): Promise<string> {
    const suffix = `instance/service-accounts/default/identity?audience=${this.opts.audience}&format=full`;
    let body: string;
    try {
      this.fetches++;
      body = await this.opts.metadataGet(suffix);
    } catch (e) {
      throw new CredentialError(`Failed to get vm identity token from metadata server: ${errorMessage(e)}`, { cause: e });
    }
    const token = body.trim();
    if (token === "") throw new CredentialError("the GCE metadata server answered an empty identity token");
    try {
      (this.opts.writeToken ?? writeTokenFile)(this.opts.jwtPath, body);
    } catch (e) {
      throw new CredentialError(`writing the vm identity token to ${this.opts.jwtPath}: ${errorMessage(e)}`, { cause: e });
    }
    this.cached = { token, expMs: jwtExpiryMs(token) };
    this.opts.log.debug(`Got GCE identity token: ${token.length} bytes`);
    return token;
  }
}
