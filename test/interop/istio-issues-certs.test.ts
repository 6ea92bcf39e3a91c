// Istio's agent issues in certificates, SDS and the CA client (issue 32, docs/compat.md "Istio
// agent issues"): each scenario runs Istio's own pilot-agent (built from the oracle) and our
// compiled agent in turn against istiod-lite (Istio's CA; with --honor-requested-ttl it signs for
// the SECRET_TTL asked, so rotations happen within the test). The Istio side must show the
// reported failure, for the reported reason; ours must not have it.
//
// What stands in for Envoy: the recording stand-in (it never asks for secrets), and where a test
// needs secrets asked for, sds-watch.ts, an SDS client that asks, ACKs and re-asks as Envoy does on
// one StreamSecrets per resource.

import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { startIstiodLite, type IstiodLite } from "./support/istiod-lite.ts";
import { ROOT_FILE, startCertPod, SDS_SOCKET, type CertPod } from "./support/cert-pod.ts";
import { watchSecrets, type SdsWatch } from "./support/sds-watch.ts";
import { kubeVolume } from "../support/kube-volume.ts";

const AGENTS = [
  ["Istio's pilot-agent", PILOT_AGENT],
  ["ours", DIST_AGENT],
] as const;

type KeyCert = { "tls.crt": string; "tls.key": string };

const EC = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
const DAY = 86_400_000;

/** A self-signed EC certificate and its PKCS#8 key, valid from `from` to `to` (ms). */
async function keyCert(cn: string, from = Date.now() - DAY, to = Date.now() + DAY): Promise<KeyCert> {
  const keys = (await crypto.subtle.generateKey(EC, true, ["sign", "verify"])) as CryptoKeyPair;
  const c = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${cn}`,
    notBefore: new Date(from),
    notAfter: new Date(to),
    keys,
    signingAlgorithm: EC,
  });
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", keys.privateKey)).toString("base64");
  const key = `-----BEGIN PRIVATE KEY-----\n${pkcs8.match(/.{1,64}/g)!.join("\n")}\n-----END PRIVATE KEY-----\n`;
  return { "tls.crt": c.toString("pem") + "\n", "tls.key": key };
}

async function until<T>(what: string, probe: () => T | undefined, ms: number, pod?: CertPod): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms${pod ? `; agent log tail:\n${pod.log().split("\n").slice(-25).join("\n")}` : ""}`);
    await Bun.sleep(100);
  }
}

const socketUp = (pod: CertPod) => until("the SDS socket", () => (existsSync(pod.path(SDS_SOCKET)) ? true : undefined), 20_000, pod);

describeRequiring({ check: interopUnmet }, "Istio agent issues (certificates): Istio's pilot-agent has them, ours does not", () => {
  let lite: IstiodLite;
  const work = mkdtempSync(join(tmpdir(), "agent-istio-issues-"));
  const pods: CertPod[] = [];
  const watches: SdsWatch[] = [];
  const pod = async (bin: string, o: Parameters<typeof startCertPod>[2] = {}) => {
    const p = await startCertPod(bin, lite, o);
    pods.push(p);
    return p;
  };
  const watch = (p: CertPod, names: string[]) => {
    const w = watchSecrets(p.path(SDS_SOCKET), names);
    watches.push(w);
    return w;
  };
  const stopAll = async () => {
    for (const w of watches.splice(0)) w.close();
    for (const p of pods.splice(0)) await p.stop();
  };

  beforeAll(async () => {
    requireBinary();
    lite = await startIstiodLite("", { honorRequestedTtl: true });
  }, 90_000);
  afterAll(async () => {
    await stopAll();
    await lite?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  // Three rotations of a file-mounted client certificate (a DestinationRule's clientCertificate /
  // privateKey, asked for as `file-cert:<cert>~<key>`), published as kubelet publishes a secret.
  // After each one, a sentinel secret in a plain secret volume is rotated too: once its push has
  // arrived, the agent has handled the first volume's events as well (Istio's watch loop handles
  // events in order); a missed rotation is then a missed rotation, not a slow one.
  async function rotateFileCert(bin: string, layout: "secret volume" | "link into a secret volume", expectMissed = false) {
    const base = mkdtempSync(join(work, "files-"));
    const sets = await Promise.all([0, 1, 2, 3].map((i) => keyCert(`client-${i}`)));
    const sentinels = await Promise.all([0, 1, 2, 3].map((i) => keyCert(`sentinel-${i}`)));
    const vol = kubeVolume(join(base, "client"), sets[0]!);
    const sentinelVol = kubeVolume(join(base, "sentinel"), sentinels[0]!);
    let cert = join(vol.dir, "tls.crt");
    let key = join(vol.dir, "tls.key");
    if (layout === "link into a secret volume") {
      // cert-manager csi-lib style: a stable name linked to a file of another mount.
      const stable = join(base, "stable");
      mkdirSync(stable);
      symlinkSync(cert, join(stable, "cert.pem"));
      symlinkSync(key, join(stable, "key.pem"));
      cert = join(stable, "cert.pem");
      key = join(stable, "key.pem");
    }
    const name = `file-cert:${cert}~${key}`;
    const sentinelName = `file-cert:${join(sentinelVol.dir, "tls.crt")}~${join(sentinelVol.dir, "tls.key")}`;
    const p = await pod(bin);
    await socketUp(p);
    const a = watch(p, [name]);
    const s = watch(p, [sentinelName]);
    const has = (w: SdsWatch, k: KeyCert) => w.secrets.some((x) => x.certificateChain === k["tls.crt"]);
    await until("the first certificate pushed", () => (has(a, sets[0]!) && has(s, sentinels[0]!) ? true : undefined), 20_000, p);
    for (let r = 1; r <= 3; r++) {
      vol.update(sets[r]!);
      sentinelVol.update(sentinels[r]!);
      await until(`the sentinel's rotation ${r}`, () => (has(s, sentinels[r]!) ? true : undefined), 15_000, p);
      // After the sentinel: a rotation the agent should push gets a long bound (ours debounces each
      // directory on its own timer, and the machine may be loaded); one it should miss a short one.
      await until(`rotation ${r}`, () => (has(a, sets[r]!) ? true : undefined), expectMissed ? 3000 : 15_000).catch(() => {});
    }
    const seen = a.secrets.map((x) => sets.findIndex((k) => k["tls.crt"] === x.certificateChain)).filter((i, n, all) => i !== all[n - 1]);
    // A new stream for the same name: what the agent reads from the files when asked afresh.
    const fresh = watch(p, [name]);
    const now = await until("a fresh stream's answer", () => fresh.secrets[0], 15_000, p);
    const result = { seen, fresh: sets.findIndex((k) => k["tls.crt"] === now.certificateChain), ends: [...a.ends], log: p.log(), cert };
    await stopAll();
    return result;
  }

  test("#59912: a secret volume rotated three times; both agents push every rotation (fixed at the oracle: the ..data re-resolve)", async () => {
    for (const [who, bin] of AGENTS) {
      const r = await rotateFileCert(bin, "secret volume");
      expect({ who, seen: r.seen, fresh: r.fresh }).toEqual({ who, seen: [0, 1, 2, 3], fresh: 3 });
    }
  }, 180_000);

  test("#61161 (#59912's symptom): a stable link into a secret volume; Istio pushes the first rotation only, ours every one", async () => {
    const [istio, ours] = [await rotateFileCert(PILOT_AGENT, "link into a secret volume", true), await rotateFileCert(DIST_AGENT, "link into a secret volume")];
    // Istio: its symlink watcher armed on the link, the first rotation pushed, then silence while
    // the stream stays open; a fresh request reads the newest files, so only the watch is lost.
    expect(istio.log).toContain(`adding watcher for symlink certificate ${istio.cert}`);
    expect({ seen: istio.seen, fresh: istio.fresh, streamEnds: istio.ends }).toEqual({ seen: [0, 1], fresh: 3, streamEnds: [] });
    expect({ seen: ours.seen, fresh: ours.fresh, streamEnds: ours.ends }).toEqual({ seen: [0, 1, 2, 3], fresh: 3, streamEnds: [] });
  }, 240_000);

  // OUTPUT_CERTS with nothing asking for `default` over SDS (a gateway without mTLS, a pod whose
  // Envoy takes no workload certificate, an app reading the files): 10 s certificates.
  async function outputCerts(bin: string, sdsClient: boolean) {
    const p = await pod(bin, { env: { OUTPUT_CERTS: "etc/out", SECRET_TTL: "10s" }, files: { "etc/out/.keep": "" } });
    if (sdsClient) {
      await socketUp(p);
      watch(p, ["default"]);
    }
    const file = p.path("etc/out/cert-chain.pem");
    const read = () => (existsSync(file) ? new X509Certificate(readFileSync(file)) : undefined);
    const first = await until("OUTPUT_CERTS cert-chain.pem", read, 30_000, p);
    const expiry = Date.parse(first.validTo);
    expect(expiry - Date.now()).toBeLessThan(15_000); // istiod-lite honoured SECRET_TTL
    await until("the first certificate's expiry", () => (Date.now() > expiry + 2000 ? true : undefined), 30_000);
    const now = read()!;
    const result = {
      first: first.serialNumber,
      now: now.serialNumber,
      nowValid: Date.parse(now.validTo) > Date.now(),
      running: p.proc.exitCode === null,
      log: p.log(),
    };
    await stopAll();
    return result;
  }

  test("#53118, #26821: OUTPUT_CERTS are written once by Istio's agent and left to expire; ours rewrites them before expiry", async () => {
    const istio = await outputCerts(PILOT_AGENT, false);
    // Istio: the rotation timer only invalidates its cache and tells SDS streams; with no stream
    // asking for `default`, nothing signs again, and the file on disk expires under a live agent.
    expect({ same: istio.now === istio.first, nowValid: istio.nowValid, running: istio.running }).toEqual({ same: true, nowValid: false, running: true });
    expect(istio.log.match(/generated new workload certificate/g)).toHaveLength(1);
    // The reason, shown: the same Istio agent with an SDS client asking for `default` rewrites them.
    const asked = await outputCerts(PILOT_AGENT, true);
    expect({ same: asked.now === asked.first, nowValid: asked.nowValid }).toEqual({ same: false, nowValid: true });
    const ours = await outputCerts(DIST_AGENT, false);
    expect({ same: ours.now === ours.first, nowValid: ours.nowValid, running: ours.running }).toEqual({ same: false, nowValid: true, running: true });
  }, 240_000);

  // PROV_CERT (a VM: istio-start.sh's /etc/certs) holding cert-chain.pem but no key.pem.
  test("#48311: PROV_CERT without key.pem; Istio's agent fails every CSR on the missing key instead of using the token, ours gets its certificate", async () => {
    const results: Record<string, { issued: boolean; log: string }> = {};
    for (const [who, bin] of AGENTS) {
      const p = await pod(bin, {
        env: { PROV_CERT: "etc/prov" },
        files: { "etc/prov/root-cert.pem": lite.rootPem, "etc/prov/cert-chain.pem": (await keyCert("vm"))["tls.crt"] },
      });
      await socketUp(p);
      const w = watch(p, ["default"]);
      if (bin === PILOT_AGENT) {
        // Sentinel: the second failed attempt logged, naming the missing key.
        await until(
          "two CSR attempts failing on key.pem",
          () => ((p.log().match(/open etc\/prov\/key\.pem: no such file or directory/g) ?? []).length >= 2 ? true : undefined),
          30_000,
          p,
        );
      } else {
        await until("the workload certificate", () => w.secrets.find((x) => x.name === "default"), 20_000, p);
      }
      results[who] = { issued: w.secrets.some((x) => x.name === "default" && x.certificateChain !== ""), log: p.log() };
      await stopAll();
    }
    expect(results["Istio's pilot-agent"]!.issued).toBe(false);
    expect(results["ours"]!.issued).toBe(true);
  }, 120_000);

  test("PROV_CERT expired: both agents leave it out and use the token, as Istio's tls.go does (ours presented it and was refused before)", async () => {
    const expired = await keyCert("vm-expired", Date.now() - 3 * DAY, Date.now() - DAY);
    for (const [who, bin] of AGENTS) {
      const p = await pod(bin, {
        env: { PROV_CERT: "etc/prov" },
        files: { "etc/prov/root-cert.pem": lite.rootPem, "etc/prov/cert-chain.pem": expired["tls.crt"], "etc/prov/key.pem": expired["tls.key"] },
      });
      await socketUp(p);
      const w = watch(p, ["default"]);
      const got = await until(`${who}: the workload certificate`, () => w.secrets.find((x) => x.name === "default"), 30_000, p);
      expect(got.certificateChain).toContain("BEGIN CERTIFICATE");
      expect(p.log()).toMatch(
        bin === PILOT_AGENT ? /cert expired, using token instead/ : /PROV_CERT certificate \S+cert-chain\.pem expired at \S+: using the token instead/,
      );
      await stopAll();
    }
  }, 120_000);

  // The CA client's reconnect after a failed CSR (security/pkg/nodeagent/caclient/providers/citadel/client.go):
  // it closes the connection, then builds a new one, reading the CA root file. If that build fails
  // once (the root unreadable at that moment), the closed connection stays; every later CSR fails
  // on it and every later reconnect stops at Close's "the client connection is closing".
  test("#60326, #60349: one failed CA reconnect leaves Istio's CA client closed for good; ours recovers once the CA and its root are back", async () => {
    for (const [who, bin] of AGENTS) {
      const own = await startIstiodLite("", { honorRequestedTtl: true });
      try {
        const p = await startCertPod(bin, own, { env: { SECRET_TTL: "10s" } });
        pods.push(p);
        await socketUp(p);
        const w = watch(p, ["default"]);
        const first = await until(`${who}: the first certificate`, () => w.secrets.find((x) => x.name === "default"), 20_000, p);
        // The CA goes away, and its root file with it (a VM's root-cert.pem being replaced).
        const root = p.path(ROOT_FILE);
        rmSync(root);
        await own.down();
        const failedReconnects = () => (p.log().match(/failed reconnect/g) ?? []).length;
        if (bin === PILOT_AGENT)
          await until(
            "Istio's rotation CSR failing and its reconnect failing on the root",
            () => (/failed reconnect: .*root-cert\.pem/.test(p.log()) ? true : undefined),
            30_000,
            p,
          );
        else await until("our renewal failing on the missing root", () => (p.log().includes(`CA root certificate ${root}`) ? true : undefined), 30_000, p);
        writeFileSync(root, own.rootPem);
        await own.up();
        const back = Date.now();
        if (bin === PILOT_AGENT) {
          // Sentinel: CSRs made after the CA and the root are back, still failing on the closed connection.
          const before = failedReconnects();
          await until("two more failed reconnects after the CA is back", () => (failedReconnects() >= before + 2 ? true : undefined), 30_000, p);
          expect(p.log()).toMatch(/failed reconnect: failed to close connection: .*the client connection is closing/);
          expect(w.secrets.filter((x) => x.name === "default" && x.at > back)).toEqual([]);
        } else {
          const renewed = await until(
            "our renewed certificate",
            () => w.secrets.find((x) => x.name === "default" && x.at > back && x.certificateChain !== first.certificateChain),
            60_000,
            p,
          );
          expect(renewed.certificateChain).toContain("BEGIN CERTIFICATE");
        }
      } finally {
        await stopAll();
        await own.stop();
      }
    }
  }, 240_000);
});
