// CREDENTIAL_FETCHER_TYPE=GoogleComputeEngine against a fake GCE metadata server on loopback
// (GCE_METADATA_HOST), with a fake clock for the cache.

import { testConfig } from "../support/config.ts";
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentConfig } from "../../src/config/agentconfig.ts";
import { credentialFetcherFor, CredentialError, GceCredentialFetcher } from "../../src/credentials/index.ts";
import { TokenFirstUpstream } from "../../src/credentials/upstream.ts";
import { memoryLogger, silentLogger } from "../../src/lib/log.ts";
import type { Upstream, UpstreamHandlers } from "../../src/xds/upstream.ts";
import { fakeGce, type FakeCloud } from "../platform/fake-clouds.ts";

/** An unsigned JWT with the given claims (the fetcher only reads `exp`). */
function jwt(claims: Record<string, unknown>): string {
  const b = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${b({ alg: "RS256", typ: "JWT" })}.${b(claims)}.c2lnbmF0dXJl`;
}

const EXP_S = 1_900_000_000; // token expiry, seconds since the epoch
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function setup(identity: (aud: string, format: string) => string): { gce: FakeCloud; root: string; cfg: AgentConfig } {
  const gce = fakeGce({ projectId: "p", numericProjectId: "1", zone: "us-central1-a", instanceName: "vm", instanceId: "2", attributes: {}, identity });
  const root = mkdtempSync(join(tmpdir(), "agent-gce-cred-"));
  cleanups.push(
    () => gce.stop(),
    () => rmSync(root, { recursive: true, force: true }),
  );
  const cfg = testConfig({
    root,
    env: {
      CREDENTIAL_FETCHER_TYPE: "GoogleComputeEngine",
      TRUST_DOMAIN: "example.org",
      GCE_METADATA_HOST: gce.host,
      CREDENTIAL_IDENTITY_PROVIDER: "GoogleComputeEngine",
    },
  });
  return { gce, root, cfg };
}

describe("GoogleComputeEngine credential fetcher", () => {
  test("identity token for audience = trust domain, format=full, written to the token file 0640", async () => {
    const token = jwt({ aud: "example.org", exp: EXP_S });
    const { gce, root, cfg } = setup((aud, format) => (aud === "example.org" && format === "full" ? token : "wrong"));
    const f = credentialFetcherFor(cfg, { log: silentLogger(), now: () => EXP_S * 1000 - 3_600_000 })!;
    expect(await f.token()).toBe(token);
    const asked = gce.seen.filter((s) => s.path.startsWith("/computeMetadata/v1/instance/service-accounts/default/identity"));
    expect(asked.map((s) => s.path)).toEqual(["/computeMetadata/v1/instance/service-accounts/default/identity?audience=example.org&format=full"]);
    expect(asked[0]!.headers["metadata-flavor"]).toBe("Google");
    const path = join(root, "var/run/secrets/tokens/istio-token");
    expect(readFileSync(path, "utf8")).toBe(token);
    expect(statSync(path).mode & 0o777).toBe(0o640);
  });

  test("cached until 25 minutes before exp; refetched one millisecond later", async () => {
    let n = 0;
    const { cfg } = setup(() => jwt({ exp: EXP_S, n: ++n }));
    let now = EXP_S * 1000 - 3_600_000;
    const f = credentialFetcherFor(cfg, { log: silentLogger(), now: () => now }) as GceCredentialFetcher;
    const first = await f.token();
    now = EXP_S * 1000 - 25 * 60_000; // exactly at the grace boundary: still cached
    expect(await f.token()).toBe(first);
    expect(f.fetches).toBe(1);
    now += 1;
    const second = await f.token();
    expect(second).not.toBe(first);
    expect(f.fetches).toBe(2);
  });

  test("a token without exp is fetched on every call", async () => {
    const { cfg } = setup(() => "opaque-token");
    const f = credentialFetcherFor(cfg, { log: silentLogger(), now: () => 0 }) as GceCredentialFetcher;
    await f.token();
    await f.token();
    expect(f.fetches).toBe(2);
  });

  test("concurrent callers share one request", async () => {
    const { gce, cfg } = setup(() => jwt({ exp: EXP_S }));
    const f = credentialFetcherFor(cfg, { log: silentLogger(), now: () => 0 })!;
    await Promise.all([f.token(), f.token(), f.token()]);
    expect(gce.seen.filter((s) => s.path.includes("/identity")).length).toBe(1);
  });

  test("refresh failure: the cached token until it expires, then an error that names the cause, never the token", async () => {
    const token = jwt({ exp: EXP_S });
    let fail = false;
    const { log, lines } = memoryLogger();
    let now = EXP_S * 1000 - 3_600_000;
    const f = new GceCredentialFetcher({
      audience: "example.org",
      jwtPath: "/nonexistent/unused",
      metadataGet: async () => {
        if (fail) throw new Error("connect ECONNREFUSED");
        return token;
      },
      now: () => now,
      log,
      writeToken: () => {},
    });
    await f.token();
    fail = true;
    now = EXP_S * 1000 - 60_000; // inside the grace period, not expired
    expect(await f.token()).toBe(token);
    expect(lines.join("\n")).toContain("GCE identity token refresh failed");
    now = EXP_S * 1000 + 1;
    const err = await f.token().catch((e) => e);
    expect(err).toBeInstanceOf(CredentialError);
    expect(err.message).toContain("ECONNREFUSED");
    expect(err.message).not.toContain(token);
    expect(lines.join("\n")).not.toContain(token);
  });

  test("JWT keeps the token file path (no fetcher); Mock answers test_token; anything else is refused by name", async () => {
    const cfg = (type: string) => testConfig({ env: { CREDENTIAL_FETCHER_TYPE: type, TRUST_DOMAIN: "t" } });
    const deps = { log: silentLogger(), now: () => 0 };
    expect(credentialFetcherFor(cfg("JWT"), deps)).toBeUndefined();
    expect(credentialFetcherFor(cfg(""), deps)).toBeUndefined();
    expect(await credentialFetcherFor(cfg("Mock"), deps)!.token()).toBe("test_token");
    expect(() => credentialFetcherFor(cfg("AWS"), deps)).toThrow('CREDENTIAL_FETCHER_TYPE: invalid credential fetcher type "AWS"');
  });
});

describe("TokenFirstUpstream", () => {
  function recordingUpstream() {
    const events: string[] = [];
    const inner: Upstream = {
      describe: "istiod",
      open: () => {
        events.push("open");
        return {
          write: (b) => (events.push(`write ${Buffer.from(b).toString()}`), true),
          pause: () => events.push("pause"),
          resume: () => events.push("resume"),
          close: () => events.push("close"),
        };
      },
    };
    return { events, inner };
  }
  const handlers = (closed: string[]): UpstreamHandlers => ({ onConnected() {}, onData() {}, onDrain() {}, onClose: (s) => closed.push(s.message) });

  test("dials only once the token is there; writes made meanwhile go out in order", async () => {
    const { events, inner } = recordingUpstream();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const up = new TokenFirstUpstream(inner, { describe: "t", token: async () => (await gate, events.push("token"), "tok") }, silentLogger());
    const s = up.open({ path: "/x", delta: false }, handlers([]));
    s.write(Buffer.from("a"));
    s.pause();
    s.write(Buffer.from("b"));
    expect(events).toEqual([]);
    release();
    await Bun.sleep(5);
    expect(events).toEqual(["token", "open", "pause", "write a", "write b"]);
  });

  test("closed before the token came: never dials, onClose once", async () => {
    const { events, inner } = recordingUpstream();
    const closed: string[] = [];
    const up = new TokenFirstUpstream(inner, { describe: "t", token: async () => "tok" }, silentLogger());
    up.open({ path: "/x", delta: false }, handlers(closed)).close();
    await Bun.sleep(5);
    expect(events).toEqual([]);
    expect(closed).toEqual(["stream closed by the agent"]);
  });

  test("a failed fetch still dials (no token header), after a warning naming the source", async () => {
    const { events, inner } = recordingUpstream();
    const { log, lines } = memoryLogger();
    const up = new TokenFirstUpstream(inner, { describe: "GCE metadata identity token", token: async () => Promise.reject(new Error("metadata down")) }, log);
    up.open({ path: "/x", delta: false }, handlers([]));
    await Bun.sleep(5);
    expect(events).toEqual(["open"]);
    expect(lines.join("\n")).toContain("no token from GCE metadata identity token: metadata down");
  });
});
