// The GoogleTokenExchange token manager plugin (Istio's stsservice/tokenmanager/google): Envoy's
// subject token is exchanged at Google's STS for a federated token, and that, at IAM credentials,
// for an access token of the mesh data plane service account
// `service-<project number>@gcp-sa-meshdataplane.iam.gserviceaccount.com`.
//
// The access token is cached, whatever the request, until 5 minutes before it expires (Istio's
// defaultGracePeriod); concurrent exchanges while nothing usable is cached share one pair of calls
// (beyond Istio, which made one pair per request). Tokens never reach the log.

import type { Logger } from "../lib/log.ts";
import { federatedAudience, type AudienceInputs } from "./audience.ts";
import { CloudCallError, postJson, type CloudCallOptions } from "./cloudcall.ts";
import { ACCESS_TOKEN_TYPE, goJsonIndent, goTimeJson, type StsRequest } from "./protocol.ts";
import { errorMessage } from "../lib/errors.ts";

export const CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
/** Istio's defaultGracePeriod: a cached access token closer than this to expiry is fetched again. */
export const ACCESS_TOKEN_GRACE_MS = 300_000;
/** The lifetime asked of IAM, and assumed when its expireTime does not parse. */
export const ACCESS_TOKEN_LIFETIME_SEC = 3600;

export const DEFAULT_GOOGLE_ENDPOINTS = {
  federatedToken: "https://sts.googleapis.com/v1/token",
  iamCredentials: "https://iamcredentials.googleapis.com",
};

export interface Exchanged {
  accessToken: string;
  expiresInSec: number;
}

/** What the STS server asks of a token manager. */
export interface TokenManager {
  exchange(req: StsRequest): Promise<Exchanged>;
  /** The status dump body (JSON). */
  dump(): string;
}

export class TokenExchangeError extends Error {
  override name = "TokenExchangeError";
}

export interface GoogleExchangeOptions extends AudienceInputs {
  projectNumber: string;
  endpoints: { federatedToken: string; iamCredentials: string };
  /** Wall clock, ms since the epoch. */
  now(): number;
  log: Logger;
  call?: CloudCallOptions;
}

interface TokenRecord {
  tokenType: "federated token" | "access token";
  issueMs: number;
  expireMs: number;
  token: string;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

export class GoogleTokenExchange implements TokenManager {
  private federated: TokenRecord | undefined;
  private access: TokenRecord | undefined;
  private inflight: Promise<Exchanged> | undefined;

  constructor(private readonly opts: GoogleExchangeOptions) {}

  exchange(req: StsRequest): Promise<Exchanged> {
    const cached = this.fromCache();
    if (cached) return Promise.resolve(cached);
    this.inflight ??= this.fetchBoth(req).finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  /** Istio's DumpPluginStatus: each token's type and times, never its value. */
  dump(): string {
    const tokens = [this.federated, this.access]
      .filter((t): t is TokenRecord => t !== undefined)
      .map((t) => ({ token_type: t.tokenType, issue_time: goTimeJson(t.issueMs), expire_time: goTimeJson(t.expireMs), token: "" }));
    return goJsonIndent({ tokens }, " ");
  }

  private fromCache(): Exchanged | undefined {
    const a = this.access;
    if (!a) return undefined;
    const remaining = a.expireMs - this.opts.now();
    if (remaining <= ACCESS_TOKEN_GRACE_MS) return undefined;
    return { accessToken: a.token, expiresInSec: Math.trunc(remaining / 1000) };
  }

  private async fetchBoth(req: StsRequest): Promise<Exchanged> {
    const federated = await this.fetchFederated(req);
    return this.fetchAccess(federated);
  }

  private async fetchFederated(req: StsRequest): Promise<string> {
    const { audience, fallbackReason } = federatedAudience(req.subjectToken, this.opts);
    if (fallbackReason) this.opts.log.error(fallbackReason);
    const body = {
      audience,
      grantType: req.grantType,
      requestedTokenType: ACCESS_TOKEN_TYPE,
      subjectTokenType: req.subjectTokenType,
      subjectToken: req.subjectToken,
      scope: req.scope || CLOUD_PLATFORM_SCOPE,
    };
    this.opts.log.info(`Prepared federated token request for aud ${JSON.stringify(audience)}`);
    const start = this.opts.now();
    const text = await this.call("federated token", this.opts.endpoints.federatedToken, body, {});
    const data = parseJson(text, "federated token");
    const token = data.access_token;
    if (typeof token !== "string" || token === "") throw new TokenExchangeError("federated token response does not have access token");
    const expiresIn = data.expires_in ?? 0;
    if (typeof expiresIn !== "number" || !Number.isFinite(expiresIn))
      throw new TokenExchangeError("failed to unmarshal federated token response data: expires_in is not a number");
    const now = this.opts.now();
    this.federated = { tokenType: "federated token", issueMs: now, expireMs: now + expiresIn * 1000, token: "" };
    this.opts.log.info("fetched federated token", { latency: `${now - start}ms`, ttl: expiresIn });
    return token;
  }

  private async fetchAccess(federatedToken: string): Promise<Exchanged> {
    const sa = `service-${this.opts.projectNumber}@gcp-sa-meshdataplane.iam.gserviceaccount.com`;
    const url = `${this.opts.endpoints.iamCredentials.replace(/\/+$/, "")}/v1/projects/-/serviceAccounts/${sa}:generateAccessToken`;
    const body = { scope: [CLOUD_PLATFORM_SCOPE], lifetime: `${ACCESS_TOKEN_LIFETIME_SEC}s` };
    const start = this.opts.now();
    const text = await this.call("access token", url, body, { Authorization: `Bearer ${federatedToken}` });
    const data = parseJson(text, "access token");
    const token = data.accessToken;
    if (typeof token !== "string" || token === "") throw new TokenExchangeError("access token response does not have access token");
    const now = this.opts.now();
    const expireTime = data.expireTime;
    let expireMs = now + ACCESS_TOKEN_LIFETIME_SEC * 1000;
    let expiresInSec = ACCESS_TOKEN_LIFETIME_SEC;
    if (typeof expireTime === "string" && RFC3339.test(expireTime) && Number.isFinite(Date.parse(expireTime))) {
      expireMs = Date.parse(expireTime);
      expiresInSec = Math.trunc((expireMs - now) / 1000);
    } else {
      this.opts.log.error(
        `Failed to unmarshal timestamp ${JSON.stringify(expireTime ?? "")} from access token response, fall back to use default lifetime (${ACCESS_TOKEN_LIFETIME_SEC} seconds)`,
      );
    }
    this.access = { tokenType: "access token", issueMs: now, expireMs, token };
    this.opts.log.info("fetched access token", { latency: `${now - start}ms`, ttl: `${Math.trunc((expireMs - now) / 1000)}s` });
    return { accessToken: token, expiresInSec };
  }

  private async call(what: string, url: string, body: unknown, headers: Record<string, string>): Promise<string> {
    try {
      return await postJson(url, body, headers, this.opts.call);
    } catch (e) {
      const status = e instanceof CloudCallError ? e.status : 0;
      const msg = `failed to exchange ${what} (HTTP status ${status}): ${errorMessage(e)}`;
      this.opts.log.error(msg);
      throw new TokenExchangeError(msg);
    }
  }
}

function parseJson(text: string, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new TokenExchangeError(`failed to unmarshal ${what} response data: ${errorMessage(e)}`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new TokenExchangeError(`failed to unmarshal ${what} response data: not a JSON object`);
  return v as Record<string, unknown>;
}

/** A token manager without a plugin (an unknown `--tokenManagerPlugin`): every call fails as in Istio. */
export const NO_PLUGIN: TokenManager = {
  exchange: () => Promise.reject(new TokenExchangeError("no plugin is found")),
  dump: () => {
    throw new TokenExchangeError("no plugin is found");
  },
};
