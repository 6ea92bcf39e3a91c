// Fake Google token endpoints on loopback, speaking the public REST shapes:
// - STS v1 `POST /v1/token` (JSON body: audience, grantType, requestedTokenType, subjectToken,
//   subjectTokenType, scope) answering {access_token, issued_token_type, token_type, expires_in},
//   or 400 {error, error_description} for a request it does not accept;
// - IAM credentials v1 `POST /v1/projects/-/serviceAccounts/<email>:generateAccessToken` with
//   `Authorization: Bearer <federated token>` (JSON body: scope[], lifetime "<n>s") answering
//   {accessToken, expireTime}, or 401 {error: {code, message, status}} without the right bearer.
// Each request is recorded; a plan of failures can be queued per endpoint.

export interface SeenCall {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** One planned answer: a status and body, a delay before the normal answer, or an oversized body. */
export type PlannedAnswer = { status: number; body: string } | { delayMs: number } | { oversizedBytes: number };

export interface FakeGoogleOptions {
  federatedToken?: string;
  federatedExpiresIn?: number;
  accessToken?: string;
  /** IAM's expireTime (RFC 3339). */
  expireTime?: string;
}

export interface FakeGoogle {
  stsUrl: string;
  iamBase: string;
  stsCalls: SeenCall[];
  iamCalls: SeenCall[];
  stsPlan: PlannedAnswer[];
  iamPlan: PlannedAnswer[];
  opts: Required<FakeGoogleOptions>;
  stop(): void;
}

const json = (status: number, v: unknown) => new Response(JSON.stringify(v), { status, headers: { "Content-Type": "application/json; charset=UTF-8" } });

async function planned(plan: PlannedAnswer[]): Promise<Response | undefined> {
  const p = plan.shift();
  if (!p) return undefined;
  if ("delayMs" in p) {
    await Bun.sleep(p.delayMs);
    return undefined;
  }
  if ("oversizedBytes" in p) return new Response(`{"access_token":"${"x".repeat(p.oversizedBytes)}"}`, { headers: { "Content-Type": "application/json" } });
  return new Response(p.body, { status: p.status, headers: { "Content-Type": "application/json" } });
}

function parseBody(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

export function startFakeGoogle(o: FakeGoogleOptions = {}): FakeGoogle {
  const opts: Required<FakeGoogleOptions> = {
    federatedToken: o.federatedToken ?? "ya29.federated-FAKE-0001",
    federatedExpiresIn: o.federatedExpiresIn ?? 3600,
    accessToken: o.accessToken ?? "ya29.access-FAKE-0002",
    expireTime: o.expireTime ?? "2030-01-01T01:00:00Z",
  };
  const stsCalls: SeenCall[] = [];
  const iamCalls: SeenCall[] = [];
  const stsPlan: PlannedAnswer[] = [];
  const iamPlan: PlannedAnswer[] = [];
  const IAM_PATH = /^\/v1\/projects\/-\/serviceAccounts\/([^/:]+):generateAccessToken$/;

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const body = await req.text();
      const call = { method: req.method, path: decodeURIComponent(url.pathname), headers: Object.fromEntries(req.headers), body };
      if (url.pathname === "/v1/token") {
        stsCalls.push(call);
        const p = await planned(stsPlan);
        if (p) return p;
        if (req.method !== "POST") return json(405, { error: "invalid_request", error_description: "POST required" });
        const b = parseBody(body);
        if (!b || !(req.headers.get("content-type") ?? "").startsWith("application/json"))
          return json(400, { error: "invalid_request", error_description: "Invalid JSON payload received." });
        if (b.grantType !== "urn:ietf:params:oauth:grant-type:token-exchange")
          return json(400, { error: "unsupported_grant_type", error_description: "Invalid grant_type." });
        if (b.requestedTokenType !== "urn:ietf:params:oauth:token-type:access_token")
          return json(400, { error: "invalid_request", error_description: "Invalid requested_token_type." });
        if (b.subjectTokenType !== "urn:ietf:params:oauth:token-type:jwt")
          return json(400, { error: "invalid_request", error_description: "Invalid subject_token_type." });
        if (typeof b.subjectToken !== "string" || b.subjectToken === "")
          return json(400, { error: "invalid_request", error_description: "subject_token is required." });
        if (typeof b.audience !== "string" || !b.audience.startsWith("identitynamespace:"))
          return json(400, { error: "invalid_request", error_description: "Invalid audience." });
        if (b.subjectToken === "rejected-subject") return json(400, { error: "invalid_grant", error_description: "The token is expired." });
        return json(200, {
          access_token: opts.federatedToken,
          issued_token_type: "urn:ietf:params:oauth:token-type:access_token",
          token_type: "Bearer",
          expires_in: opts.federatedExpiresIn,
        });
      }
      const m = IAM_PATH.exec(decodeURIComponent(url.pathname));
      if (m) {
        iamCalls.push(call);
        const p = await planned(iamPlan);
        if (p) return p;
        if (req.headers.get("authorization") !== `Bearer ${opts.federatedToken}`) {
          return json(401, { error: { code: 401, message: "Request had invalid authentication credentials.", status: "UNAUTHENTICATED" } });
        }
        const b = parseBody(body);
        const scope = b?.scope;
        if (!Array.isArray(scope) || scope.length === 0 || (b?.lifetime !== undefined && !/^\d+(\.\d+)?s$/.test(String(b.lifetime)))) {
          return json(400, { error: { code: 400, message: "Invalid value at 'lifetime' or missing scope", status: "INVALID_ARGUMENT" } });
        }
        return json(200, { accessToken: opts.accessToken, expireTime: opts.expireTime });
      }
      return json(404, { error: { code: 404, message: "Not Found", status: "NOT_FOUND" } });
    },
  });
  const base = `http://127.0.0.1:${server.port}`;
  return { stsUrl: `${base}/v1/token`, iamBase: base, stsCalls, iamCalls, stsPlan, iamPlan, opts, stop: () => server.stop(true) };
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");

/** An unsigned JWT with the given claims (the agent reads the audience only). */
export function jwt(claims: Record<string, unknown>): string {
  return `${b64({ alg: "RS256", typ: "JWT" })}.${b64(claims)}.c2lnbmF0dXJl`;
}
