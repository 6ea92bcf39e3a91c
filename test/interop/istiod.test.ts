// Interop: our compiled agent against Istio's own discovery server and CA (istiod-lite, built
// from istio.io/istio). Istio's CA signs our CSR and SDS serves the chain (openssl verifies it);
// a stand-in Envoy, sending the Node of the bootstrap we wrote as Envoy would, receives the
// LDS/RDS/CDS/EDS istiod generates for the YAML over SotW and over Delta; a grpc-js-xds client
// reaches the backend istiod's VirtualService names; our DNS proxy answers from istiod's NDS;
// istiod restarts mid-stream and the client follows the new istiod's config.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpcXds from "@grpc/grpc-js-xds";
import { startGreeter } from "../../examples/greeter.ts";
import { describeRequiring } from "../support/requires.ts";
import { discoveryTypes } from "../support/fake-istiod.ts";
import { decodeDiscoveryResponse, decodeSecret } from "../e2e/envoy-resources.ts";
import { fetchSecret } from "../e2e/mesh.ts";
import { fileIfExists, freePort, httpGet, spiffeIds, startPod, until, xdsGreeterClient, type Pod } from "../e2e/pod.ts";
import { interopUnmet } from "./support/go-build.ts";
import { LITE_NAMESPACE, LITE_SERVICE_ACCOUNT, LITE_SPIFFE, LITE_TOKEN, startIstiodLite, type CsrRecord, type IstiodLite } from "./support/istiod-lite.ts";
import { GREETER_HOST, GREETER_VIP, meshYaml, REVIEWS_FQDN, REVIEWS_VIP } from "./support/mesh-yaml.ts";
import { CDS, EDS, LDS, RDS, readStandinRecords, writeStandinLauncher, type StandinRecord } from "./support/envoy-standin.ts";

grpcXds.register();

interface Started {
  pod: Pod;
  records: () => StandinRecord[];
}

describeRequiring(
  { check: interopUnmet, tools: ["openssl", "dig"], apt: ["openssl", "dnsutils"] },
  "interop: our agent with Istio's discovery server and CA",
  () => {
    let lite: IstiodLite;
    let a: Awaited<ReturnType<typeof startGreeter>>;
    let b: Awaited<ReturnType<typeof startGreeter>>;
    const work = mkdtempSync(join(tmpdir(), "agent-interop-"));
    const pods: Pod[] = [];
    let dnsPort = 0;
    let client: Awaited<ReturnType<typeof xdsGreeterClient>> | undefined;

    async function podWith(name: string, env: Record<string, string>): Promise<Started> {
      const recordFile = join(work, `${name}.jsonl`);
      const pod = await startPod({
        env: {
          POD_NAME: `${name}-0`,
          POD_NAMESPACE: LITE_NAMESPACE,
          SERVICE_ACCOUNT: LITE_SERVICE_ACCOUNT,
          CA_ADDR: lite.caAddress,
          ISTIOD_SAN: "istiod.istio-system.svc",
          INTEROP_ENVOY_RECORD: recordFile,
          ...env,
        },
        proxyConfig: { discoveryAddress: lite.xdsAddress, binaryPath: writeStandinLauncher(work), terminationDrainDuration: "1s", drainDuration: "2s" },
        files: { "var/run/secrets/istio/root-cert.pem": lite.rootPem, "var/run/secrets/tokens/istio-token": LITE_TOKEN },
      });
      pods.push(pod);
      return { pod, records: () => readStandinRecords(recordFile) };
    }

    const namesOf = (rs: StandinRecord[], typeUrl: string) =>
      new Set(rs.filter((r) => r.event === "xds" && r.typeUrl === typeUrl).flatMap((r) => r.names ?? []));
    /** `name` among the stand-in's `typeUrl` resources, or an error saying what it has got so far. */
    const hasName = (rs: StandinRecord[], typeUrl: string, name: string): true => {
      if (namesOf(rs, typeUrl).has(name)) return true;
      const got = (t: string) => [...namesOf(rs, t)].sort().join(", ") || "none";
      const types = [...new Set(rs.map((r) => (r.event === "xds" ? `xds ${r.typeUrl?.split(".").pop()}` : r.event)))].join(", ");
      const ends = rs.filter((r) => r.event === "error" || r.event === "xds-end").map((r) => `${r.event}: ${r.message ?? ""}`);
      throw new Error(`the stand-in's records: ${rs.length} (${types}); CDS: ${got(CDS)}; EDS: ${got(EDS)}; ends and errors: ${ends.join("; ") || "none"}`);
    };

    let sotw: Started;
    beforeAll(async () => {
      a = await startGreeter("A");
      b = await startGreeter("B");
      lite = await startIstiodLite(meshYaml({ a: a.port, b: b.port }, "b"));
      dnsPort = await freePort();
      sotw = await podWith("sotw", {
        ISTIO_DELTA_XDS: "false",
        INTEROP_ENVOY_XDS: "sotw",
        OUTPUT_CERTS: "etc/certs",
        ISTIO_META_DNS_CAPTURE: "true",
        DNS_PROXY_ADDR: `127.0.0.1:${dnsPort}`,
      });
    }, 90_000);

    afterAll(async () => {
      client?.close();
      for (const p of pods) {
        p.kill();
        p.box.cleanup();
      }
      for (const f of ["sotw", "grpc", "delta"])
        for (const r of readStandinRecords(join(work, `${f}.jsonl`)))
          if (r.event === "start")
            try {
              process.kill(r.pid, "SIGKILL");
            } catch {}
      await lite?.stop();
      a?.stop();
      b?.stop();
      rmSync(work, { recursive: true, force: true });
    });

    test("Istio's CA signs our CSR (token and ClusterID sent), SDS serves the chain, openssl verifies it", async () => {
      const pod = sotw.pod;
      const chain = await until(pod, "cert-chain.pem signed by Istio's CA", () => fileIfExists(pod.path("etc/certs/cert-chain.pem")), 30_000);
      expect(await spiffeIds(chain)).toEqual([LITE_SPIFFE]);
      const csr = lite.records().find((r): r is CsrRecord => r.kind === "csr")!;
      expect(csr.method).toBe("/istio.v1.auth.IstioCertificateService/CreateCertificate");
      expect(csr.metadata["authorization"]).toEqual([`Bearer ${LITE_TOKEN}`]);
      expect(csr.metadata["clusterid"]).toEqual(["Kubernetes"]);

      const leaf = join(work, "leaf.pem");
      const root = join(work, "root.pem");
      writeFileSync(leaf, chain);
      writeFileSync(root, lite.rootPem);
      const v = Bun.spawnSync(["openssl", "verify", "-CAfile", root, leaf]);
      expect(`${v.stdout}${v.stderr}`.trim()).toBe(`${leaf}: OK`);

      const { Req } = discoveryTypes();
      const enc = (typeUrl: string, names: string[]) => Buffer.from(Req.encode(Req.create({ typeUrl, resourceNames: names })).finish());
      const res = decodeDiscoveryResponse(await fetchSecret(pod.path("var/run/secrets/workload-spiffe-uds/socket"), "default", enc));
      const secret = decodeSecret(res.resources[0]!.value);
      expect(secret.name).toBe("default");
      expect(secret.certificateChain).toBe(chain);
    }, 40_000);

    test("SotW: the stand-in Envoy gets istiod's CDS, EDS, LDS and RDS for the YAML through our agent; ready", async () => {
      const { pod, records } = sotw;
      const want = "outbound|50051||greeter.interop.example";
      await until(pod, "EDS for the greeter cluster", () => hasName(records(), EDS, want), 30_000);
      await until(pod, "RDS for port 50051", () => (namesOf(records(), RDS).has("50051") ? true : undefined), 30_000);
      expect(namesOf(records(), CDS)).toContain(want);
      expect(namesOf(records(), CDS)).toContain("outbound|50051||greeter-b.interop.example");
      expect(namesOf(records(), LDS)).toContain("0.0.0.0_50051");
      expect(records().filter((r) => r.event === "error")).toEqual([]);
      const xds = lite.records().filter((r) => r.kind === "xds");
      expect(
        xds.some(
          (r) => r.kind === "xds" && r.method.endsWith("/StreamAggregatedResources") && r.node.id?.startsWith("sidecar~127.0.0.1~sotw-0.fake-namespace~"),
        ),
      ).toBe(true);
      const ready = await until(
        pod,
        "/healthz/ready 200",
        async () => ((await httpGet(`http://127.0.0.1:${pod.statusPort}/healthz/ready`)).status === 200 ? true : undefined),
        20_000,
      );
      expect(ready).toBe(true);
    }, 60_000);

    test("NDS from istiod: our DNS proxy answers the ServiceEntry and the Service names", async () => {
      const dig = (name: string) =>
        Bun.spawnSync(["dig", "+short", "+time=2", "+tries=1", "-p", String(dnsPort), "@127.0.0.1", name, "A"])
          .stdout.toString()
          .trim();
      const answer = await until(sotw.pod, "DNS answer for the ServiceEntry", () => dig(GREETER_HOST) || undefined, 20_000);
      expect(answer).toBe(GREETER_VIP);
      expect(dig(REVIEWS_FQDN)).toBe(REVIEWS_VIP);
      expect(dig(`reviews.${LITE_NAMESPACE}`)).toBe(REVIEWS_VIP);
    }, 30_000);

    test("Delta: the stand-in Envoy gets the same four types over DeltaAggregatedResources", async () => {
      const { pod, records } = await podWith("delta", { ISTIO_DELTA_XDS: "true", INTEROP_ENVOY_XDS: "delta" });
      const want = "outbound|50051||greeter.interop.example";
      await until(pod, "delta EDS for the greeter cluster", () => hasName(records(), EDS, want), 30_000);
      await until(pod, "delta RDS 50051", () => (namesOf(records(), RDS).has("50051") ? true : undefined), 30_000);
      expect(namesOf(records(), CDS)).toContain(want);
      expect(namesOf(records(), LDS)).toContain("0.0.0.0_50051");
      const xds = lite.records().filter((r) => r.kind === "xds" && r.node.id?.includes("~delta-0."));
      expect(xds.map((r) => r.method)).toContain("/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources");
    }, 60_000);

    test("grpc-js-xds reaches the backend istiod's VirtualService names; istiod restarts mid-stream and the client follows", async () => {
      const { pod } = await podWith("grpc", {});
      client = await xdsGreeterClient(pod, `xds:///${GREETER_HOST}:50051`);
      const first = await until(pod, "RPC through istiod's config", () => client!.sayHello("alice", 5000), 30_000);
      expect(first).toBe("hello alice from B");

      lite.setConfig(meshYaml({ a: a.port, b: b.port }, "a"));
      await lite.restart();
      const after = await until(
        pod,
        "calls follow the restarted istiod's VirtualService (greeter A)",
        async () => {
          const r = await client!.sayHello("bob", 3000);
          return r.endsWith("from A") ? r : undefined;
        },
        40_000,
      );
      expect(after).toBe("hello bob from A");
      expect(pod.exitCode()).toBeNull();
    }, 90_000);
  },
);
