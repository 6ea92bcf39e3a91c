// The secret manager as the agent builds it from AgentConfig: warm-up readiness, SDS socket,
// OUTPUT_CERTS modes, DISABLE_ENVOY, external SDS socket (files-only), CA_PROVIDER=local.

import { afterEach, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentConfig } from "../../src/config/agentconfig.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { testConfig } from "../support/config.ts";
import { createSecretManager, type SecretManager } from "../../src/sds/manager.ts";
import { keyAhead } from "../../src/sds/keyahead.ts";
import { sdsCodec } from "../../src/sds/proto.ts";
import { SDS_SERVICE } from "../../src/sds/server.ts";
import { FakeCa } from "../support/fake-ca.ts";
import { OPENSSL, verifyChain } from "../ca/openssl.ts";
import { testRequiring } from "../support/requires.ts";
import { FakeClock, until } from "./fake-clock.ts";

const codec = sdsCodec();
let root: string;
let ca: FakeCa | undefined;
let abort: AbortController;
let mgr: SecretManager | undefined;

afterEach(async () => {
  abort?.abort();
  await mgr?.stopped();
  await Bun.sleep(20);
  await ca?.close();
  ca = undefined;
  mgr = undefined;
  rmSync(root, { recursive: true, force: true });
});

/** Pod `p` in namespace `default`, service account `app`, through the real loader. */
function config(env: Record<string, string>): AgentConfig {
  return testConfig({
    env: { POD_NAME: "p", POD_NAMESPACE: "default", SERVICE_ACCOUNT: "app", INSTANCE_IP: "10.0.0.1", XDS_AUTHORIZED_UIDS: "*", ...env },
    root,
    uid: process.getuid?.() ?? 0,
  });
}

async function withCa(env: Record<string, string> = {}): Promise<AgentConfig> {
  ca = await FakeCa.start({ token: "tok", spiffeId: "spiffe://cluster.local/ns/default/sa/app" });
  mkdirSync(join(root, "var/run/secrets/tokens"), { recursive: true });
  writeFileSync(join(root, "var/run/secrets/tokens/istio-token"), "tok");
  writeFileSync(join(root, "ca-root.pem"), ca.tls!.rootPem);
  return config({ CA_ADDR: ca.address, CA_ROOT_CA: join(root, "ca-root.pem"), ISTIOD_SAN: "", ECC_SIGNATURE_ALGORITHM: "ECDSA", ...env });
}

function fetch(socket: string, names: string[]) {
  const c = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
  return new Promise<ReturnType<typeof codec.decodeResponse>>((resolve, reject) =>
    c.makeUnaryRequest(
      `/${SDS_SERVICE}/FetchSecrets`,
      (b: Buffer) => b,
      (b: Buffer) => b,
      codec.encodeRequest({ resourceNames: names }),
      (e, b) => {
        c.close();
        e ? reject(e) : resolve(codec.decodeResponse(b!));
      },
    ),
  );
}

function start(cfg: AgentConfig, clock?: FakeClock) {
  const log = memoryLogger();
  const readiness = new Readiness();
  abort = new AbortController();
  mgr = createSecretManager(cfg, { log: log.log, registry: newRegistry(), readiness, ...(clock ? { clock, random: () => 0.5 } : {}) });
  return { log, readiness, mgr, started: mgr.start(abort.signal) };
}

describe("createSecretManager", () => {
  testRequiring(OPENSSL, "warms default and ROOTCA, serves SDS on the workload socket, writes OUTPUT_CERTS 0600", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const cfg = await withCa({ OUTPUT_CERTS: "./out" });
    const { readiness, started, log } = start(cfg);
    expect(readiness.describe()).toContain("certificate warmed");
    await started;
    await until(() => readiness.warnings().length === 0, "certificate warmed");
    expect(log.lines.some((l) => l.includes("certificates warmed"))).toBe(true);
    const socket = join(root, "var/run/secrets/workload-spiffe-uds/socket");
    expect(statSync(socket).isSocket()).toBe(true);
    const res = await fetch(socket, ["default", "ROOTCA"]);
    expect(res.resources.map((r) => r.name)).toEqual(["default", "ROOTCA"]);
    expect(ca!.requests.length).toBe(1);
    await until(() => existsSync(join(root, "out/root-cert.pem")), "output files");
    expect(statSync(join(root, "out/key.pem")).mode & 0o777).toBe(0o600);
    expect(verifyChain(readFileSync(join(root, "out/cert-chain.pem"), "utf8"), readFileSync(join(root, "out/root-cert.pem"), "utf8")).ok).toBe(true);
  });

  test("warm-up failure is named in readiness (a warning: Istio does not gate on it), retried with backoff, then recovers", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const cfg = await withCa();
    ca!.mode = "reject-token";
    const clock = new FakeClock(Date.now());
    const { readiness, started } = start(cfg, clock);
    await started;
    await until(() => readiness.describe().includes("rejected the token"), "warm failure in readiness");
    expect(readiness.warnings().map((w) => w.name)).toEqual(["certificate warmed"]);
    expect(readiness.isReady()).toBe(true);
    ca!.mode = "ok";
    clock.advance(1000);
    await until(() => readiness.warnings().length === 0, "recovered");
  });

  test("DISABLE_ENVOY: no SDS socket, files kept fresh; 0644 under Kubernetes", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const cfg = await withCa({ DISABLE_ENVOY: "true", OUTPUT_CERTS: join(root, "o"), KUBERNETES_SERVICE_HOST: "10.96.0.1" });
    const { readiness, started, mgr: m } = start(cfg);
    await started;
    await until(() => readiness.warnings().length === 0, "warmed");
    expect(m.server).toBeUndefined();
    expect(existsSync(join(root, "var/run/secrets/workload-spiffe-uds/socket"))).toBe(false);
    await until(() => existsSync(join(root, "o/cert-chain.pem")), "output");
    expect(statSync(join(root, "o/cert-chain.pem")).mode & 0o777).toBe(0o644);
  });

  test("an external SDS server on the socket: files-only on credential-uds/files-socket, no CA", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const ext = join(root, "var/run/secrets/workload-spiffe-uds/socket");
    mkdirSync(join(root, "var/run/secrets/workload-spiffe-uds"), { recursive: true });
    const spire = createServer((s) => s.destroy());
    await new Promise<void>((r) => spire.listen(ext, r));
    const cfg = await withCa();
    const { readiness, started, mgr: m } = start(cfg);
    await started;
    expect(m.mode).toEqual({ kind: "files-only", socketPath: join(root, "var/run/secrets/credential-uds/files-socket"), externalSocket: ext });
    expect(readiness.isReady()).toBe(true);
    expect(statSync(m.mode!.socketPath).isSocket()).toBe(true);
    await Bun.sleep(50);
    expect(ca!.requests.length).toBe(0);
    spire.close();
  });

  test("a stale socket file nobody answers on is removed and replaced", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const path = join(root, "var/run/secrets/workload-spiffe-uds/socket");
    mkdirSync(join(root, "var/run/secrets/workload-spiffe-uds"), { recursive: true });
    writeFileSync(path, "");
    const { started, mgr: m } = start(await withCa());
    await started;
    expect(m.mode?.kind).toBe("workload");
    expect(statSync(path).isSocket()).toBe(true);
  });

  testRequiring(OPENSSL, "CA_PROVIDER=local signs in process; the chain verifies to the local root", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const { readiness, started, mgr: m } = start(config({ CA_PROVIDER: "local", ECC_SIGNATURE_ALGORITHM: "ECDSA" }));
    await started;
    await until(() => readiness.isReady(), "warmed");
    const res = await fetch(m.mode!.socketPath, ["default", "ROOTCA"]);
    const chain = (res.resources[0] as { certificateChain: string }).certificateChain;
    const rootPem = (res.resources[1] as { trustedCa: string }).trustedCa;
    expect(verifyChain(chain, rootPem).ok).toBe(true);
  });

  test("WORKLOAD_IDENTITY_SOCKET_FILE with a path, or a custom name without a server, is an error", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const a = start(await withCa({ WORKLOAD_IDENTITY_SOCKET_FILE: "a/b" }));
    expect(String(await a.started.catch((e) => e))).toContain("must be a file name");
    const b = start(config({ CA_PROVIDER: "local", WORKLOAD_IDENTITY_SOCKET_FILE: "spire.sock" }));
    expect(String(await b.started.catch((e) => e))).toContain("WORKLOAD_IDENTITY_SOCKET_FILE=spire.sock");
    mgr = undefined;
  });
});

describe("the first key", () => {
  /** A manager whose first-key starter records when it is called and what its generator is asked. */
  function build(cfg: AgentConfig) {
    const events: string[] = [];
    const readiness = new Readiness();
    abort = new AbortController();
    const m = createSecretManager(cfg, {
      log: memoryLogger().log,
      registry: newRegistry(),
      readiness,
      keyAhead: (o) => {
        events.push(`ahead ${o.algorithm}`);
        const real = keyAhead(o);
        return (ko, spiffe) => (events.push(`generate ${spiffe}`), real(ko, spiffe));
      },
    });
    mgr = m;
    return { m, events, readiness };
  }

  test("starts when the manager is built, before start(), and serves the first CSR", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const { m, events, readiness } = build(await withCa());
    expect(events).toEqual(["ahead ECDSA"]);
    await m.start(abort.signal);
    await until(() => readiness.warnings().length === 0, "certificate warmed");
    expect(events).toEqual(["ahead ECDSA", "generate spiffe://cluster.local/ns/default/sa/app"]);
    expect(ca!.requests.length).toBe(1);
  });

  test("no CA (mounted certificates): no key is started", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    const { events } = build(config({ FILE_MOUNTED_CERTS: "true" }));
    expect(events).toEqual([]);
  });

  test("a socket file that may be an external SDS server's: the key waits for start(), which finds it stale", async () => {
    root = mkdtempSync(join(tmpdir(), "mgr-"));
    mkdirSync(join(root, "var/run/secrets/workload-spiffe-uds"), { recursive: true });
    writeFileSync(join(root, "var/run/secrets/workload-spiffe-uds/socket"), "");
    const { m, events, readiness } = build(await withCa());
    expect(events).toEqual([]);
    await m.start(abort.signal);
    expect(m.mode?.kind).toBe("workload");
    await until(() => readiness.warnings().length === 0, "certificate warmed");
    expect(events).toEqual(["ahead ECDSA", "generate spiffe://cluster.local/ns/default/sa/app"]);
  });
});
