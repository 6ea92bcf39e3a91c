// The STS server on a real loopback port, driven by a real HTTP client posting RFC 8693 requests:
// the success body, every validation failure with Istio's status code and the RFC's error JSON
// (exact bytes), the status dump, loopback-only listening, plugin selection, start failures, and
// that no token reaches the log.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { LogSink } from "../../src/lib/log.ts";
import type { PlatformInfo } from "../../src/config/metadata.ts";
import { createStsServerFrom, type StsSettings, StsServer } from "../../src/sts/index.ts";
import { stsListenHost } from "../../src/sts/index.ts";
import { jwt, startFakeGoogle } from "./fake-google.ts";

const g = startFakeGoogle({ expireTime: "2030-01-01T01:00:00Z" });
const T0 = Date.parse("2030-01-01T00:00:00Z");
const SUBJECT = jwt({ aud: "cluster.local", sub: "system:serviceaccount:demo:client" });
const GCE_PLATFORM: PlatformInfo = {
  metadata: { gcp_project: "vm-proj", gcp_project_number: "31337" },
  locality: { region: "", zone: "", subZone: "" },
  labels: {},
  isKubernetes: false,
};

function settings(over: Partial<StsSettings> = {}): StsSettings {
  return {
    host: "127.0.0.1",
    port: 0,
    plugin: "GoogleTokenExchange",
    trustDomain: "cluster.local",
    identityProvider: "GoogleComputeEngine",
    gkeClusterUrlEnv: "",
    federatedTokenEndpoint: g.stsUrl,
    iamCredentialsEndpoint: g.iamBase,
    ...over,
  };
}

interface Running {
  server: StsServer;
  url: string;
  lines: string[];
  log(line: string): void;
  stop(): Promise<void>;
}

async function run(over: Partial<StsSettings> = {}, platform: PlatformInfo = GCE_PLATFORM): Promise<Running> {
  const lines: string[] = [];
  const sink = new LogSink({ outputLevels: "all:debug", write: (l) => lines.push(l) });
  const server = createStsServerFrom(settings(over), { sink, platform: async () => platform, now: () => T0 });
  const ac = new AbortController();
  await server.start(ac.signal);
  return {
    server,
    url: `http://127.0.0.1:${server.port()}`,
    lines,
    log: (l) => sink.logger("test").info(l),
    stop: async () => {
      ac.abort();
      await server.stopped();
    },
  };
}

const FORM = "application/x-www-form-urlencoded";
function form(fields: Record<string, string>): string {
  return new URLSearchParams(fields).toString();
}
const GOOD = {
  grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
  subject_token: SUBJECT,
  subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
  scope: "https://www.googleapis.com/auth/cloud-platform",
};

let s: Running;
beforeAll(async () => {
  s = await run();
});
afterAll(async () => {
  await s?.stop();
  g.stop();
});

describe("POST /token", () => {
  test("a well-formed request gets the access token in RFC 8693's shape, laid out as Istio's", async () => {
    const res = await fetch(`${s.url}/token`, { method: "POST", headers: { "Content-Type": FORM }, body: form(GOOD) });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.text()).toBe(
      '{\n "access_token": "ya29.access-FAKE-0002",\n "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",\n "token_type": "Bearer",\n "expires_in": 3600,\n "scope": "",\n "refresh_token": ""\n}',
    );
    expect(JSON.parse(g.stsCalls.at(-1)!.body).audience).toBe("identitynamespace:cluster.local:GoogleComputeEngine");
  });

  const invalid: [string, RequestInit, string][] = [
    ["GET", { method: "GET" }, "request method is invalid, should be POST but get GET"],
    [
      "a JSON body",
      { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(GOOD) },
      "request content type is invalid, should be application/x-www-form-urlencoded but get application/json",
    ],
    [
      "a charset parameter (Istio compared the header exactly)",
      { method: "POST", headers: { "Content-Type": `${FORM}; charset=utf-8` }, body: form(GOOD) },
      "request content type is invalid, should be application/x-www-form-urlencoded but get application/x-www-form-urlencoded; charset=utf-8",
    ],
    [
      "a bad escape",
      { method: "POST", headers: { "Content-Type": FORM }, body: `${form(GOOD)}&x=%zz` },
      'failed to parse query from STS request: invalid URL escape "%zz"',
    ],
    [
      "another grant type",
      { method: "POST", headers: { "Content-Type": FORM }, body: form({ ...GOOD, grant_type: "client_credentials" }) },
      "request query grant_type is invalid, should be urn:ietf:params:oauth:grant-type:token-exchange but get client_credentials",
    ],
    ["no subject_token", { method: "POST", headers: { "Content-Type": FORM }, body: form({ ...GOOD, subject_token: "" }) }, "subject_token is empty"],
    [
      "another subject token type",
      { method: "POST", headers: { "Content-Type": FORM }, body: form({ ...GOOD, subject_token_type: "urn:ietf:params:oauth:token-type:access_token" }) },
      "subject_token_type is invalid, should be urn:ietf:params:oauth:token-type:jwt but get urn:ietf:params:oauth:token-type:access_token",
    ],
  ];
  for (const [name, init, reason] of invalid) {
    test(`${name}: 400 invalid_request`, async () => {
      const res = await fetch(`${s.url}/token`, init);
      expect(res.status).toBe(400);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(await res.text()).toBe(`{\n  "error": "invalid_request",\n  "error_description": ${JSON.stringify(reason)},\n  "error_uri": ""\n}`);
    });
  }

  test("a form over 64 KiB: 400 invalid_request naming the limit", async () => {
    const res = await fetch(`${s.url}/token`, {
      method: "POST",
      headers: { "Content-Type": FORM },
      body: form({ ...GOOD, subject_token: "a".repeat(70 * 1024) }),
    });
    expect(res.status).toBe(400);
    const body = JSON.parse(await res.text());
    expect(body.error).toBe("invalid_request");
    expect(body.error_description).toContain("request body larger than 65536 bytes");
  });

  test("Google refusing the exchange: 500 invalid_target with the reason", async () => {
    const res = await fetch(`${s.url}/token`, {
      method: "POST",
      headers: { "Content-Type": FORM },
      body: form({ ...GOOD, subject_token: "rejected-subject" }),
    });
    // A cached token would answer without asking Google: this server has one, so use a fresh one.
    expect(res.status).toBe(200);
    const fresh = await run();
    try {
      const r2 = await fetch(`${fresh.url}/token`, {
        method: "POST",
        headers: { "Content-Type": FORM },
        body: form({ ...GOOD, subject_token: "rejected-subject" }),
      });
      expect(r2.status).toBe(500);
      expect(await r2.text()).toBe(
        `{\n  "error": "invalid_target",\n  "error_description": "failed to exchange federated token (HTTP status 400): HTTP Status 400, body: {\\"error\\":\\"invalid_grant\\",\\"error_description\\":\\"The token is expired.\\"}",\n  "error_uri": ""\n}`,
      );
    } finally {
      await fresh.stop();
    }
  });

  test("other paths are Go's 404", async () => {
    const res = await fetch(`${s.url}/token/extra`, { method: "POST" });
    expect(res.status).toBe(404);
    expect(await res.text()).toBe("404 page not found\n");
  });
});

describe("the status dump", () => {
  test("/stsStatus lists the tokens fetched, without their values", async () => {
    const fresh = await run();
    try {
      expect(await (await fetch(`${fresh.url}/stsStatus`)).text()).toBe('{\n "tokens": []\n}');
      await fetch(`${fresh.url}/token`, { method: "POST", headers: { "Content-Type": FORM }, body: form(GOOD) });
      const dump = await (await fetch(`${fresh.url}/stsStatus`)).text();
      expect(JSON.parse(dump)).toEqual({
        tokens: [
          { token_type: "federated token", issue_time: "2030-01-01T00:00:00Z", expire_time: "2030-01-01T01:00:00Z", token: "" },
          { token_type: "access token", issue_time: "2030-01-01T00:00:00Z", expire_time: "2030-01-01T01:00:00Z", token: "" },
        ],
      });
      expect(dump).not.toContain("ya29");
    } finally {
      await fresh.stop();
    }
  });
});

describe("listening and plugins", () => {
  test("listens on 127.0.0.1 only: ::1 on the same port is refused", async () => {
    const port = s.server.port();
    const refused = await new Promise<boolean>((resolve) => {
      const c = connect({ host: "::1", port });
      c.once("connect", () => (c.destroy(), resolve(false)));
      c.once("error", () => resolve(true));
    });
    expect(refused).toBe(true);
  });

  test("with ::1 (an IPv6 proxy) it listens there, and not on 127.0.0.1", async () => {
    const lines: string[] = [];
    const server = createStsServerFrom(settings({ host: "::1" }), {
      sink: new LogSink({ write: (l) => lines.push(l) }),
      platform: async () => GCE_PLATFORM,
      now: () => T0,
    });
    const ac = new AbortController();
    await server.start(ac.signal);
    try {
      const res = await fetch(`http://[::1]:${server.port()}/stsStatus`);
      expect(res.status).toBe(200);
      await expect(fetch(`http://127.0.0.1:${server.port()}/stsStatus`)).rejects.toThrow();
      expect(lines.join("\n")).toContain(`Start listening on ::1:${server.port()}`);
    } finally {
      ac.abort();
      await server.stopped();
    }
  });

  test("the listen address follows Istio's rule: ::1 for IPv6-only proxies or an IPv6 INSTANCE_IP that is not link-local", () => {
    expect(stsListenHost("ipv4", "10.0.0.1")).toBe("127.0.0.1");
    expect(stsListenHost("ipv6", "")).toBe("::1");
    expect(stsListenHost("dual", "fd00::5")).toBe("::1");
    expect(stsListenHost("dual", "fe80::1")).toBe("127.0.0.1");
    expect(stsListenHost("dual", "10.0.0.1")).toBe("127.0.0.1");
  });

  test("an unknown --tokenManagerPlugin serves, but every request is 500 'no plugin is found'", async () => {
    const r = await run({ plugin: "Other" });
    try {
      const res = await fetch(`${r.url}/token`, { method: "POST", headers: { "Content-Type": FORM }, body: form(GOOD) });
      expect(res.status).toBe(500);
      expect(await res.text()).toBe('{\n  "error": "invalid_target",\n  "error_description": "no plugin is found",\n  "error_uri": ""\n}');
      const dump = await fetch(`${r.url}/stsStatus`);
      expect(dump.status).toBe(500);
      expect(await dump.text()).toBe("failure in dumping STS server status: no plugin is found");
    } finally {
      await r.stop();
    }
  });

  test("GoogleTokenExchange without a GCP project number stops the start with Istio's message", async () => {
    await expect(run({}, { ...GCE_PLATFORM, metadata: { gcp_project: "p" } })).rejects.toThrow(
      "GoogleTokenExchange token manager specified but failed to ready GCP project information",
    );
  });

  test("an endpoint that is not a URL stops the start naming the variable", async () => {
    await expect(run({ federatedTokenEndpoint: "sts.example" })).rejects.toThrow('GOOGLE_STS_ENDPOINT: "sts.example" is not a URL');
  });

  test("a port in use stops the start naming --stsPort", async () => {
    await expect(run({ port: s.server.port() })).rejects.toThrow(`STS server cannot listen on 127.0.0.1:${s.server.port()} (--stsPort)`);
  });
});

test("no token reaches the log: subject, federated or access token, at debug level", async () => {
  const r = await run();
  try {
    await fetch(`${r.url}/token`, { method: "POST", headers: { "Content-Type": FORM }, body: form(GOOD) });
    await fetch(`${r.url}/token`, { method: "POST", headers: { "Content-Type": FORM }, body: form({ ...GOOD, grant_type: "x" }) });
    await fetch(`${r.url}/stsStatus`);
    r.log("sentinel: after the exchanges");
    const text = r.lines.join("\n");
    expect(text).toContain("sentinel: after the exchanges");
    expect(text).toContain("fetched access token");
    expect(text).toContain("STS request is invalid");
    expect(text).not.toContain(SUBJECT);
    expect(text).not.toContain(SUBJECT.split(".")[1]!);
    expect(text).not.toContain("ya29.federated-FAKE-0001");
    expect(text).not.toContain("ya29.access-FAKE-0002");
  } finally {
    await r.stop();
  }
});
