// The e2e cases shared by both modes (modes.ts): each test file calls defineSuite(mode). Cases:
// cold start to ready, certificate issued then rotated, Envoy crash, /quitquitquit (one pod with
// an xDS-speaking Envoy and 4 s certificates); a config push reaching a grpc-js-xds client; and
// SIGTERM during a push of large responses (drain then exit, nothing half-written).

import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createPrivateKey, createPublicKey } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import * as grpcXds from "@grpc/grpc-js-xds";
import { startGreeter } from "../../examples/greeter.ts";
import { loadX509 } from "../support/x509.ts";
import { AdsClient } from "./ads-client.ts";
import { CLUSTER, LISTENER } from "./envoy-resources.ts";
import { SPIFFE_ID, TERMINATION_DRAIN_MS, type Mode, type Scene } from "./modes.ts";
import { certSerial, fileIfExists, httpGet, spiffeIds, until, xdsGreeterClient, type Pod } from "./pod.ts";
import type { E2eEnvoyRecord } from "./xds-envoy.ts";

grpcXds.register();

const TARGET = "xds:///greeter.demo:50051";
/** Besides the drain: SIGTERM to Envoy, its exit, the components' stop (seconds in the worst case). */
const EXIT_AFTER_DRAIN_MS = 5_000;

const certPath = (pod: Pod, f = "cert-chain.pem") => pod.path(`etc/certs/${f}`);
const readyAnswer = (pod: Pod) => httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`);
const xdsSeen = (records: E2eEnvoyRecord[], pid?: number) =>
  records.filter((r) => r.event === "xds" && (pid === undefined || r.pid === pid)).map((r) => r.xds!);
const envoyStarts = (s: Scene) => s.records().filter((r) => r.event === "start");

async function untilReady(pod: Pod) {
  return until(pod, "GET /healthz/ready answers 200", async () => {
    const r = await readyAnswer(pod);
    return r.status === 200 ? r : undefined;
  });
}

async function untilEnvoyGotConfig(s: Scene, pid?: number) {
  return until(s.pod, `Envoy${pid ? ` (pid ${pid})` : ""} received CDS and LDS through the agent's XDS socket`, () => {
    const types = new Set(
      xdsSeen(s.records(), pid)
        .filter((x) => !x.problem)
        .map((x) => x.typeUrl),
    );
    return types.has(CLUSTER) && types.has(LISTENER) ? types : undefined;
  });
}

/**
 * A PEM private key, certificate chain and root that parse, with the key matching the leaf. The
 * agent writes the three files one by one (key first, each atomically), so a reader that crosses a
 * rotation (4 s certificates here) can see a new key beside the old chain for a moment: the pair
 * is read until the chain is the same before and after the key was read and the key matches it.
 * A key that never matches its chain fails, naming both.
 */
async function expectWholeCertFiles(pod: Pod) {
  const x509 = await loadX509();
  const { chain, keySpki, leafSpki } = await until(pod, "key.pem matching the leaf of cert-chain.pem", () => {
    const chain = fileIfExists(certPath(pod))!;
    const key = fileIfExists(certPath(pod, "key.pem"))!;
    if (fileIfExists(certPath(pod)) !== chain) return undefined; // rotated while reading: read again
    const leafSpki = Buffer.from(new x509.X509Certificate(chain).publicKey.rawData);
    const keySpki = createPublicKey(createPrivateKey(key)).export({ type: "spki", format: "der" });
    if (!leafSpki.equals(keySpki))
      throw new Error(`key.pem's public key ${keySpki.toString("hex").slice(-16)} is not the leaf's ${leafSpki.toString("hex").slice(-16)}`);
    return { chain, keySpki, leafSpki };
  });
  expect(await spiffeIds(chain)).toEqual([SPIFFE_ID]);
  new x509.X509Certificate(fileIfExists(certPath(pod, "root-cert.pem"))!);
  expect(leafSpki.equals(keySpki)).toBe(true);
}

/** Files under `dir` whose names look like an interrupted atomic write (`<name>.tmp-...`). */
function tempFiles(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).filter((p) => /\.tmp/.test(p));
}

export function defineSuite(mode: Mode): void {
  const cleanups: (() => void | Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  async function scene(env: Record<string, string>, greeterPort = 9): Promise<Scene> {
    const s = await mode.start({ greeterPort, env: { OUTPUT_CERTS: "etc/certs", ...env } });
    cleanups.push(() => s.cleanup());
    return s;
  }

  describe(`${mode.name} mode, one pod (xDS-speaking Envoy, 4 s certificates)`, () => {
    let s: Scene | undefined;
    beforeAll(async () => {
      s = await mode.start({
        greeterPort: 9,
        env: { OUTPUT_CERTS: "etc/certs", E2E_ENVOY_XDS: "1", SECRET_TTL: "4s", ENVOY_RESTART_POLICY: "on-failure", ENVOY_RESTART_BACKOFF_BASE: "100ms" },
      });
    });
    afterAll(() => s?.cleanup());

    test("cold start to ready: Envoy spawned, its CDS and LDS served through the agent, a SPIFFE certificate, /healthz/ready 200", async () => {
      const start = await until(s!.pod, "Envoy started", () => envoyStarts(s!)[0]);
      expect(start.argv![start.argv!.indexOf("-c") + 1]).toMatch(/envoy-rev\.json$/);
      await untilEnvoyGotConfig(s!);
      expect((await untilReady(s!.pod)).status).toBe(200);
      await until(s!.pod, "OUTPUT_CERTS cert-chain.pem", () => fileIfExists(certPath(s!.pod)));
      await expectWholeCertFiles(s!.pod);
      expect(xdsSeen(s!.records()).filter((x) => x.problem)).toEqual([]);
    }, 20_000);

    test("the workload certificate is issued, then rotated before it expires (SECRET_TTL=4s)", async () => {
      const pod = s!.pod;
      const first = await until(pod, "first certificate in OUTPUT_CERTS", () => fileIfExists(certPath(pod)));
      const firstSerial = await certSerial(first);
      const rotated = await until(
        pod,
        "a rotated certificate (new serial) in OUTPUT_CERTS",
        async () => {
          const pem = fileIfExists(certPath(pod));
          return pem && (await certSerial(pem)) !== firstSerial ? pem : undefined;
        },
        12_000,
      );
      const x509 = await loadX509();
      const notAfter = new x509.X509Certificate(rotated).notAfter.getTime();
      expect(notAfter - Date.now()).toBeLessThanOrEqual(4_000);
      await expectWholeCertFiles(pod);
      expect(pod.exitCode()).toBeNull();
    }, 20_000);

    test("Envoy crash under ENVOY_RESTART_POLICY=on-failure (opt-in): the agent starts Envoy again, it gets its config again, the pod is ready", async () => {
      const pod = s!.pod;
      const first = await until(pod, "Envoy started", () => envoyStarts(s!)[0]);
      await fetch(`http://127.0.0.1:${pod.adminPort}/fake/crash?signal=SIGKILL`, { method: "POST", signal: AbortSignal.timeout(2000) });
      const second = await until(pod, "Envoy restarted after the crash", () => envoyStarts(s!).find((r) => r.pid !== first.pid), 10_000);
      expect(second.argv).toEqual(first.argv);
      await untilEnvoyGotConfig(s!, second.pid);
      expect((await untilReady(pod)).status).toBe(200);
      expect(pod.exitCode()).toBeNull();
    }, 20_000);

    test("/quitquitquit: GET is refused; POST stops Envoy without draining and the agent exits 0", async () => {
      const pod = s!.pod;
      const get = await fetch(`http://127.0.0.1:${pod.statusPort}/quitquitquit`, { signal: AbortSignal.timeout(2000) });
      expect(get.status).toBe(405);
      expect(pod.exitCode()).toBeNull();
      const post = await fetch(`http://127.0.0.1:${pod.statusPort}/quitquitquit`, { method: "POST", signal: AbortSignal.timeout(2000) });
      expect(post.status).toBe(200);
      expect(await pod.waitExit()).toBe(0);
      const records = s!.records();
      expect(records.filter((r) => r.path === "/drain_listeners")).toEqual([]);
      const last = envoyStarts(s!).at(-1)!;
      expect(records.some((r) => r.pid === last.pid && (r.event === "signal" || r.event === "exit"))).toBe(true);
    }, 20_000);
  });

  test(`${mode.name} mode: a config push reaches the grpc-js-xds client (its calls move); Envoy without config keeps the pod unready`, async () => {
    const a = await startGreeter("A");
    const b = await startGreeter("B");
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    const s = await scene({}, a.port);
    const client = await xdsGreeterClient(s.pod, TARGET);
    cleanups.push(() => client.close());
    expect(await client.sayHello("alice", 10_000)).toBe("hello alice from A");
    // This Envoy stand-in never gets CDS/LDS: readiness says so, as Istio's does.
    // (Polled: until the stand-in's admin port listens, the answer names the refused connection.)
    const notReady = await until(s.pod, "readiness naming the missing CDS update", async () => {
      const r = await readyAnswer(s.pod);
      return r.body.includes("cds updates") ? r : undefined;
    });
    expect(notReady.status).toBe(503);
    expect(notReady.body).toContain("cds updates: 0 successful");

    await s.route(b.port);
    const moved = await until(s.pod, "calls move to greeter B after the config push", async () => {
      const answer = await client.sayHello("bob", 5_000);
      return answer.endsWith("from B") ? answer : undefined;
    });
    expect(moved).toBe("hello bob from B");
  }, 25_000);

  test(`${mode.name} mode: SIGTERM during a push of ~300 KiB responses: xDS served through the drain, every message whole, the stream ends at a message boundary with the agent's status, drain then exit 0, files complete`, async () => {
    const s = await scene({ SECRET_TTL: "4s" });
    const pod = s.pod;
    await until(pod, "Envoy started", () => envoyStarts(s)[0]);
    const envoyBootstrap = await until(pod, "envoy-rev.json written", () => fileIfExists(pod.path("etc/istio/proxy/envoy-rev.json")));
    expect(JSON.parse(envoyBootstrap).admin).toBeDefined();
    await until(pod, "OUTPUT_CERTS written", () => fileIfExists(certPath(pod)));

    const stopPushes = s.startBigPushes();
    cleanups.push(stopPushes);
    const client = new AdsClient(pod.path("etc/istio/proxy/XDS"), undefined, 150);
    cleanups.push(() => client.close());
    client.request(CLUSTER);
    await until(pod, "3 large responses received", () => {
      if (client.received.filter((r) => r.gen !== undefined).length >= 3) return true;
      throw new Error(
        `client got ${client.received.length} responses, last: ${JSON.stringify(client.received.slice(-2).map(({ typeUrl, bytes, problem }) => ({ typeUrl, bytes, problem })))}`,
      );
    });

    const sigterm = Date.now();
    pod.agent.proc.kill("SIGTERM");
    const code = await pod.waitExit(TERMINATION_DRAIN_MS + EXIT_AFTER_DRAIN_MS + 5_000);
    const exitMs = Date.now() - sigterm;
    await stopPushes();
    const end = await Promise.race([client.ended, Bun.sleep(5_000).then(() => undefined)]);

    expect(code).toBe(0);
    expect(exitMs).toBeGreaterThanOrEqual(TERMINATION_DRAIN_MS);
    // Envoy stopped on SIGTERM: the agent never fell back to SIGKILL (its log is complete: it has
    // exited). How long the exit took after the drain depends on the machine's load; printed.
    expect(pod.tail(10_000)).not.toContain("sending SIGKILL");
    if (exitMs >= TERMINATION_DRAIN_MS + EXIT_AFTER_DRAIN_MS) console.log(`exit ${exitMs} ms after SIGTERM (drain ${TERMINATION_DRAIN_MS} ms)`);

    // Every message the client got was whole and valid; the push went on during the drain.
    expect(client.received.filter((r) => r.problem)).toEqual([]);
    expect(client.received.filter((r) => r.gen !== undefined && r.t > sigterm).length).toBeGreaterThan(0);
    // The relay ends Envoy's stream at a message boundary and the XDS server lets the last bytes
    // and the trailers out before closing the connection.
    expect(end).toBeDefined();
    // (The client's transport error, if any, is compared too: it names how a broken end broke.)
    expect({ status: end!.status, partialBytes: end!.partialBytes, partialOf: end!.partialOf, message: end!.message, error: end!.error }).toEqual({
      status: 14,
      partialBytes: 0,
      partialOf: 0,
      message: "agent shutting down",
      error: undefined,
    });

    // Envoy: drain_listeners first, SIGTERM after terminationDrainDuration.
    const records = s.records();
    const drained = records.find((r) => r.event === "call" && r.path === "/drain_listeners");
    expect(drained?.method).toBe("POST");
    expect(drained?.query).toContain("inboundonly");
    const stopped = records.find((r) => r.event === "signal" && r.signal === "SIGTERM");
    expect(stopped).toBeDefined();
    expect(stopped!.t - drained!.t).toBeGreaterThanOrEqual(TERMINATION_DRAIN_MS - 50);

    // Files: what remains parses; the rendered Envoy bootstrap is removed at exit (docs/envoy.md).
    const grpcBootstrap = JSON.parse(fileIfExists(pod.path("etc/istio/proxy/grpc-bootstrap.json"))!);
    expect(grpcBootstrap.xds_servers[0].server_uri).toMatch(/^unix:\/\/.*XDS$/);
    expect(existsSync(pod.path("etc/istio/proxy/envoy-rev.json"))).toBe(false);
    await expectWholeCertFiles(pod);
    expect(tempFiles(pod.box.dir)).toEqual([]);
  }, 25_000);
}
