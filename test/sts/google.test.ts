// The GoogleTokenExchange plugin against fake Google STS and IAM servers on loopback: the request
// shapes it sends, caching until 5 minutes before expiry (fake clock), one pair of calls for
// concurrent exchanges, and every failure of the cloud endpoints (4xx, 5xx, slow, oversized,
// malformed JSON) with bounded retries.

import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { LogSink } from "../../src/lib/log.ts";
import { GoogleTokenExchange, TokenExchangeError } from "../../src/sts/google.ts";
import type { StsRequest } from "../../src/sts/protocol.ts";
import { jwt, startFakeGoogle } from "./fake-google.ts";

const g = startFakeGoogle({ expireTime: "2030-01-01T01:00:00Z" });
afterAll(() => g.stop());

const T0 = Date.parse("2030-01-01T00:00:00Z");
const SUBJECT = jwt({ aud: "cluster.local", sub: "system:serviceaccount:demo:client" });

function request(over: Partial<StsRequest> = {}): StsRequest {
  return {
    grantType: "urn:ietf:params:oauth:grant-type:token-exchange",
    resource: "",
    audience: "",
    scope: "",
    requestedTokenType: "",
    subjectToken: SUBJECT,
    subjectTokenType: "urn:ietf:params:oauth:token-type:jwt",
    actorToken: "",
    actorTokenType: "",
    ...over,
  };
}

function plugin(over: { identityProvider?: string; gkeClusterUrlEnv?: string; platformClusterUrl?: string; timeoutMs?: number } = {}) {
  const clock = { t: T0 };
  const lines: string[] = [];
  const sink = new LogSink({ outputLevels: "all:debug", write: (l) => lines.push(l) });
  const p = new GoogleTokenExchange({
    trustDomain: "td.example",
    identityProvider: over.identityProvider ?? "",
    gkeClusterUrlEnv: over.gkeClusterUrlEnv ?? "",
    platformClusterUrl: over.platformClusterUrl ?? "https://container.googleapis.com/v1/projects/p/locations/l/clusters/c",
    projectNumber: "31337",
    endpoints: { federatedToken: g.stsUrl, iamCredentials: g.iamBase },
    now: () => clock.t,
    log: sink.logger("token"),
    call: { timeoutMs: over.timeoutMs ?? 2_000, pauseMs: 1 },
  });
  return { p, clock, lines };
}

beforeEach(() => {
  g.stsCalls.length = 0;
  g.iamCalls.length = 0;
  g.stsPlan.length = 0;
  g.iamPlan.length = 0;
});

describe("GoogleTokenExchange requests", () => {
  test("exchanges at STS, then at IAM for the mesh data plane service account, with Google's JSON shapes", async () => {
    const { p } = plugin();
    const t = await p.exchange(request());
    expect(t).toEqual({ accessToken: "ya29.access-FAKE-0002", expiresInSec: 3600 });
    expect(g.stsCalls).toHaveLength(1);
    expect(g.stsCalls[0]!.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(g.stsCalls[0]!.body)).toEqual({
      audience: "identitynamespace:cluster.local:https://container.googleapis.com/v1/projects/p/locations/l/clusters/c",
      grantType: "urn:ietf:params:oauth:grant-type:token-exchange",
      requestedTokenType: "urn:ietf:params:oauth:token-type:access_token",
      subjectTokenType: "urn:ietf:params:oauth:token-type:jwt",
      subjectToken: SUBJECT,
      scope: "https://www.googleapis.com/auth/cloud-platform",
    });
    expect(g.iamCalls).toHaveLength(1);
    expect(g.iamCalls[0]!.path).toBe("/v1/projects/-/serviceAccounts/service-31337@gcp-sa-meshdataplane.iam.gserviceaccount.com:generateAccessToken");
    expect(g.iamCalls[0]!.headers["authorization"]).toBe("Bearer ya29.federated-FAKE-0001");
    expect(JSON.parse(g.iamCalls[0]!.body)).toEqual({ scope: ["https://www.googleapis.com/auth/cloud-platform"], lifetime: "3600s" });
  });

  test("the request's scope replaces the default one", async () => {
    const { p } = plugin();
    await p.exchange(request({ scope: "https://www.googleapis.com/auth/trace.append" }));
    expect(JSON.parse(g.stsCalls[0]!.body).scope).toBe("https://www.googleapis.com/auth/trace.append");
  });

  test("audience: the token's single aud, else the trust domain; provider: identity provider, else GKE_CLUSTER_URL, else the platform's cluster URL", async () => {
    const aud = async (subjectToken: string, o: Parameters<typeof plugin>[0]) => {
      g.stsCalls.length = 0;
      await plugin(o).p.exchange(request({ subjectToken }));
      return JSON.parse(g.stsCalls[0]!.body).audience;
    };
    expect(await aud(SUBJECT, { identityProvider: "GoogleComputeEngine", gkeClusterUrlEnv: "https://gke/env" })).toBe(
      "identitynamespace:cluster.local:GoogleComputeEngine",
    );
    expect(await aud(SUBJECT, { gkeClusterUrlEnv: "https://gke/env" })).toBe("identitynamespace:cluster.local:https://gke/env");
    expect(await aud(jwt({ aud: ["a", "b"] }), { identityProvider: "idp" })).toBe("identitynamespace:td.example:idp");
    expect(await aud(jwt({ aud: [""] }), { identityProvider: "idp" })).toBe("identitynamespace:td.example:idp");
    expect(await aud("not-a-jwt", { identityProvider: "idp" })).toBe("identitynamespace:td.example:idp");
  });
});

describe("GoogleTokenExchange cache (fake clock)", () => {
  test("the access token is reused, whatever the request, until 5 minutes before it expires", async () => {
    const { p, clock } = plugin();
    await p.exchange(request());
    clock.t = T0 + 1_000;
    expect(await p.exchange(request({ subjectToken: jwt({ aud: "other" }) }))).toEqual({ accessToken: "ya29.access-FAKE-0002", expiresInSec: 3599 });
    clock.t = T0 + (3600 - 301) * 1000;
    expect(await p.exchange(request())).toEqual({ accessToken: "ya29.access-FAKE-0002", expiresInSec: 301 });
    expect(g.stsCalls).toHaveLength(1);
    // 300 s left: inside the grace period, fetched again.
    clock.t = T0 + (3600 - 300) * 1000;
    expect(await p.exchange(request())).toEqual({ accessToken: "ya29.access-FAKE-0002", expiresInSec: 300 });
    expect(g.stsCalls).toHaveLength(2);
    expect(g.iamCalls).toHaveLength(2);
  });

  test("concurrent exchanges with nothing cached share one pair of calls", async () => {
    const { p } = plugin();
    g.stsPlan.push({ delayMs: 100 });
    const all = await Promise.all([p.exchange(request()), p.exchange(request()), p.exchange(request())]);
    expect(all.map((t) => t.accessToken)).toEqual(["ya29.access-FAKE-0002", "ya29.access-FAKE-0002", "ya29.access-FAKE-0002"]);
    expect(g.stsCalls).toHaveLength(1);
    expect(g.iamCalls).toHaveLength(1);
  });

  test("after a failed exchange the next request asks again", async () => {
    const { p } = plugin();
    g.stsPlan.push({ status: 400, body: '{"error":"invalid_grant"}' });
    await expect(p.exchange(request())).rejects.toThrow(TokenExchangeError);
    expect((await p.exchange(request())).accessToken).toBe("ya29.access-FAKE-0002");
    expect(g.stsCalls).toHaveLength(2);
  });

  test("an expireTime that is not RFC 3339 means Istio's default lifetime, 3600 s", async () => {
    const bad = startFakeGoogle({ expireTime: "tomorrow" });
    try {
      const clock = { t: T0 };
      const p = new GoogleTokenExchange({
        trustDomain: "td",
        identityProvider: "idp",
        gkeClusterUrlEnv: "",
        platformClusterUrl: "",
        projectNumber: "1",
        endpoints: { federatedToken: bad.stsUrl, iamCredentials: bad.iamBase },
        now: () => clock.t,
        log: new LogSink({ write: () => {} }).logger("token"),
      });
      expect(await p.exchange(request())).toEqual({ accessToken: "ya29.access-FAKE-0002", expiresInSec: 3600 });
      clock.t = T0 + 3_000_000;
      expect((await p.exchange(request())).expiresInSec).toBe(600);
      expect(bad.stsCalls).toHaveLength(1);
    } finally {
      bad.stop();
    }
  });

  test("the status dump lists each token's type and times, never its value", async () => {
    const { p, clock } = plugin();
    expect(p.dump()).toBe('{\n "tokens": []\n}');
    clock.t = T0 + 250;
    await p.exchange(request());
    expect(p.dump()).toBe(
      [
        "{",
        ' "tokens": [',
        "  {",
        '   "token_type": "federated token",',
        '   "issue_time": "2030-01-01T00:00:00.25Z",',
        '   "expire_time": "2030-01-01T01:00:00.25Z",',
        '   "token": ""',
        "  },",
        "  {",
        '   "token_type": "access token",',
        '   "issue_time": "2030-01-01T00:00:00.25Z",',
        '   "expire_time": "2030-01-01T01:00:00Z",',
        '   "token": ""',
        "  }",
        " ]",
        "}",
      ].join("\n"),
    );
  });
});

describe("GoogleTokenExchange failures of the cloud endpoints", () => {
  test("5xx is retried (10 ms apart in Istio) and succeeds when Google recovers", async () => {
    const { p } = plugin();
    g.stsPlan.push({ status: 503, body: "{}" }, { status: 500, body: "{}" });
    g.iamPlan.push({ status: 502, body: "{}" });
    expect((await p.exchange(request())).accessToken).toBe("ya29.access-FAKE-0002");
    expect(g.stsCalls).toHaveLength(3);
    expect(g.iamCalls).toHaveLength(2);
    // A retry sends the same body again.
    expect(g.stsCalls[2]!.body).toBe(g.stsCalls[0]!.body);
  });

  test("5xx at every attempt: 5 attempts, then an error naming the status and body", async () => {
    const { p } = plugin();
    for (let i = 0; i < 6; i++) g.stsPlan.push({ status: 503, body: '{"error":"backend unavailable"}' });
    await expect(p.exchange(request())).rejects.toThrow(
      'failed to exchange federated token (HTTP status 503): HTTP Status 503, body: {"error":"backend unavailable"}',
    );
    expect(g.stsCalls).toHaveLength(5);
    expect(g.iamCalls).toHaveLength(0);
  });

  test("4xx is not retried", async () => {
    const { p } = plugin();
    await expect(p.exchange(request({ subjectToken: "rejected-subject" }))).rejects.toThrow(
      'failed to exchange federated token (HTTP status 400): HTTP Status 400, body: {"error":"invalid_grant","error_description":"The token is expired."}',
    );
    expect(g.stsCalls).toHaveLength(1);
  });

  test("IAM refusing the federated token is an access token error", async () => {
    const { p } = plugin();
    g.iamPlan.push({ status: 403, body: '{"error":{"code":403,"status":"PERMISSION_DENIED"}}' });
    await expect(p.exchange(request())).rejects.toThrow("failed to exchange access token (HTTP status 403): HTTP Status 403");
    expect(g.iamCalls).toHaveLength(1);
  });

  test("a slow answer is cut at the per-attempt timeout and retried", async () => {
    const { p } = plugin({ timeoutMs: 150 });
    for (let i = 0; i < 5; i++) g.stsPlan.push({ delayMs: 400 });
    await expect(p.exchange(request())).rejects.toThrow(`failed to exchange federated token (HTTP status 0): no answer from ${g.stsUrl} within 150ms`);
    expect(g.stsCalls).toHaveLength(5);
  });

  test("an answer over 64 KiB is refused, not retried", async () => {
    const { p } = plugin();
    g.stsPlan.push({ oversizedBytes: 70 * 1024 });
    await expect(p.exchange(request())).rejects.toThrow("answer larger than 65536 bytes");
    expect(g.stsCalls).toHaveLength(1);
  });

  test("malformed JSON and a missing token are errors naming the response", async () => {
    const { p } = plugin();
    g.stsPlan.push({ status: 200, body: "{not json" });
    await expect(p.exchange(request())).rejects.toThrow("failed to unmarshal federated token response data");
    g.stsPlan.push({ status: 200, body: '{"token_type":"Bearer"}' });
    await expect(p.exchange(request())).rejects.toThrow("federated token response does not have access token");
    g.iamPlan.push({ status: 200, body: '{"expireTime":"2030-01-01T01:00:00Z"}' });
    await expect(p.exchange(request())).rejects.toThrow("access token response does not have access token");
    g.iamPlan.push({ status: 200, body: "[1,2]" });
    await expect(p.exchange(request())).rejects.toThrow("failed to unmarshal access token response data: not a JSON object");
  });
});
