// A VM onboarded with Istio's own tools, started by Istio's own script, once with Istio's
// pilot-agent and once with ours installed as pilot-agent. The VM's files (cluster.env,
// mesh.yaml, hosts, root-cert.pem, istio-token) come from istioctl's `x workload entry
// configure` code (test/interop/vmconfig) for a WorkloadGroup; istio-start.sh is the oracle
// module's tools/packaging/common/istio-start.sh, copied at run time and run unchanged, in a
// private mount, network and UTS namespace (support/vm-sandbox.ts: the host is untouched) with
// istiod-lite as istiod at the address the hosts file names. Compared: Envoy's arguments and
// bootstrap, the Node istiod receives, the CSR and certificate fetched with the token, the
// user the agent runs as, readiness, the capture rules istio-start.sh programs, SIGTERM's exit,
// and `istio-start.sh clean`.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { interopUnmet, ISTIOD_LITE, istioSource, PILOT_AGENT, VMCONFIG } from "./support/go-build.ts";
import { LITE_NAMESPACE, LITE_SERVICE_ACCOUNT, LITE_SPIFFE, LITE_TOKEN, type CsrRecord, type XdsRecord } from "./support/istiod-lite.ts";
import { jsonDiff, showValue } from "./support/json-diff.ts";
import { ISTIOD_IP, VM_HOSTNAME, VM_IP } from "./support/vm-sandbox.ts";
import { runVm, type VmRun } from "./support/vm-run.ts";

// The namespace and service account are the identity istiod-lite's authenticator (Istio's
// FakeAuthenticator) gives every caller: istiod refuses a proxy whose Node names another.
const WORKLOAD_GROUP = `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata:
  name: ratings-vm
  namespace: ${LITE_NAMESPACE}
spec:
  metadata:
    labels:
      app: ratings
      version: v2
    annotations:
      proxy.istio.io/config: |
        proxyMetadata:
          ISTIO_META_VM_ROLE: backend
  template:
    serviceAccount: ${LITE_SERVICE_ACCOUNT}
    network: vm-network
    ports:
      http: 9080
`;

/** The istio ConfigMap's mesh config as `istioctl install` leaves it, trimmed. */
const MESH_CONFIG = `defaultConfig:
  discoveryAddress: istiod.istio-system.svc:15012
  proxyMetadata: {}
  tracing:
    zipkin:
      address: zipkin.istio-system:9411
enablePrometheusMerge: true
rootNamespace: istio-system
trustDomain: cluster.local
`;

/** What istiod-lite serves: a Service in the mesh, so CDS/EDS/LDS/RDS are not empty. */
const ISTIOD_CONFIG = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: details
  namespace: ${LITE_NAMESPACE}
spec:
  hosts: [details.example.com]
  location: MESH_INTERNAL
  ports:
  - {number: 9080, name: http, protocol: HTTP}
  resolution: STATIC
  endpoints:
  - address: 10.10.10.20
`;

/**
 * Known differences in the compared documents. The first is in docs/compat.md (the pod
 * differential found it too); the second is the oracle's build: `go build` without Istio's
 * version stamp (-ldflags -X istio.io/istio/pkg/version...) reports "unknown" (asserted below).
 */
const EXPECTED: { doc: "argv" | "bootstrap" | "node"; path: RegExp; reason: string }[] = [
  { doc: "argv", path: /^\[1\]$/, reason: "Envoy's -c: Istio passes the relative etc/istio/proxy/envoy-rev.json, we pass an absolute path" },
  { doc: "bootstrap", path: /^node\.metadata\.ISTIO_VERSION$/, reason: "the oracle pilot-agent is built without a version stamp" },
  { doc: "node", path: /^metadata\.ISTIO_VERSION$/, reason: "the oracle pilot-agent is built without a version stamp" },
];

const known = (doc: (typeof EXPECTED)[number]["doc"], path: string) => EXPECTED.some((e) => e.doc === doc && e.path.test(path));

function differences(doc: (typeof EXPECTED)[number]["doc"], theirs: unknown, ours: unknown): string[] {
  return jsonDiff(theirs, ours)
    .filter((d) => !known(doc, d.path))
    .map((d) => `${doc} ${d.path}: Istio ${showValue(d.theirs)}, ours ${showValue(d.ours)}`);
}

const firstXds = (r: VmRun) => r.records.find((x): x is XdsRecord => x.kind === "xds");
const csrs = (r: VmRun) => r.records.filter((x): x is CsrRecord => x.kind === "csr");

function openssl(args: string[], stdin: string): string {
  const p = Bun.spawnSync(["openssl", ...args], { stdin: new TextEncoder().encode(stdin), stdout: "pipe", stderr: "pipe" });
  return p.stdout.toString() + p.stderr.toString();
}

/** Key, subject and SANs of a CSR as openssl reads them. */
function csrFacts(pem: string): string[] {
  const text = openssl(["req", "-noout", "-text"], pem);
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /^(Subject:|Public Key Algorithm|Public-Key|URI:|DNS:)/.test(l) || l.startsWith("URI:"));
}

const explain = (r: VmRun) =>
  `${r.label}: readiness ${JSON.stringify(r.readiness)}, exit ${r.exitCode}\n--- istio-start.sh output ---\n${r.startOutput.slice(-3000)}\n--- /var/log/istio ---\n${r.agentLog.slice(-4000)}`;

describeRequiring(
  {
    root: true,
    tools: ["unshare", "nsenter", "setpriv", "useradd", "groupadd", "ip", "iptables-nft-save", "iptables-legacy-save", "openssl", "ps"],
    apt: ["util-linux", "passwd", "iproute2", "iptables", "openssl", "procps"],
    check: interopUnmet,
  },
  "VM start: istio-start.sh with Istio's workload entry files, Istio's pilot-agent vs ours",
  () => {
    let work: string;
    let vmFiles: string;
    const runs: { theirs?: VmRun; ours?: VmRun } = {};

    beforeAll(async () => {
      requireBinary();
      work = mkdtempSync(join(tmpdir(), "vm-start-"));
      // istiod-lite's root (created on its first start), shared by both runs and the VM files.
      const rootState = join(work, "root");
      const lite = Bun.spawn([ISTIOD_LITE, "--state", rootState], { stdout: "pipe", stderr: "pipe" });
      const reader = (lite.stdout as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      lite.kill("SIGTERM");
      await lite.exited;
      writeFileSync(join(work, "wg.yaml"), WORKLOAD_GROUP);
      writeFileSync(join(work, "mesh.yaml"), MESH_CONFIG);
      vmFiles = join(work, "vm");
      const cfg = Bun.spawnSync(
        [VMCONFIG, "--workload-group", join(work, "wg.yaml"), "--mesh-config", join(work, "mesh.yaml"), "--root-cert", join(rootState, "root-cert.pem")].concat(
          ["--token", LITE_TOKEN, "--internal-ip", VM_IP, "--ingress-ip", ISTIOD_IP, "-o", vmFiles],
        ),
        { stdout: "pipe", stderr: "pipe" },
      );
      if (cfg.exitCode !== 0) throw new Error(`vmconfig failed: ${cfg.stderr.toString()}`);
      const packaging = join(istioSource(), "tools/packaging/common");
      // One after the other: the machine is shared, and each run owns its namespaces.
      const common = { vmFiles, packaging, rootState, config: ISTIOD_CONFIG };
      runs.theirs = await runVm({ label: "istio", agent: PILOT_AGENT, ...common });
      runs.ours = await runVm({ label: "ours", agent: DIST_AGENT, ...common });
    }, 300_000);

    afterAll(() => {
      if (work) rmSync(work, { recursive: true, force: true });
    });

    test("workload entry configure wrote the files a VM is onboarded with", () => {
      const read = (f: string) => readFileSync(join(vmFiles, f), "utf8");
      expect(read("hosts")).toBe(`${ISTIOD_IP} istiod.istio-system.svc\n`);
      expect(read("istio-token")).toBe(LITE_TOKEN);
      expect(read("root-cert.pem")).toStartWith("-----BEGIN CERTIFICATE-----");
      const env = read("cluster.env");
      for (const line of [
        "CANONICAL_SERVICE='ratings'",
        "ISTIO_INBOUND_PORTS='9080'",
        "ISTIO_LOCAL_EXCLUDE_PORTS='22,15090,15021,15020'",
        "ISTIO_META_DNS_CAPTURE='true'",
        "ISTIO_META_MESH_ID=''",
        "ISTIO_META_VM_ROLE='backend'",
        "ISTIO_SERVICE_CIDR='*'",
        `ISTIO_SVC_IP='${VM_IP}'`,
        `SERVICE_ACCOUNT='${LITE_SERVICE_ACCOUNT}'`,
        `POD_NAMESPACE='${LITE_NAMESPACE}'`,
        "TRUST_DOMAIN='cluster.local'",
      ])
        expect(env.split("\n")).toContain(line);
      expect(read("mesh.yaml")).toContain("discoveryAddress: istiod.istio-system.svc:15012");
    });

    describe("Istio's pilot-agent (the reference run)", () => {
      test("starts Envoy, becomes ready, is stopped by SIGTERM", () => {
        const r = runs.theirs!;
        expect(r.envoyStart, explain(r)).toBeDefined();
        expect(r.readiness[r.readiness.length - 1], explain(r)).toBe(200);
        expect(r.verify, explain(r)).toContain(": OK");
        expect(r.rules.nft + r.rules.legacy).toContain("ISTIO_OUTPUT");
      });
    });

    describe("ours installed as pilot-agent", () => {
      test("runs as istio-proxy and starts Envoy with the same arguments and bootstrap", () => {
        const [a, b] = [runs.theirs!, runs.ours!];
        expect(b.envoyStart, explain(b)).toBeDefined();
        expect(b.agentUser).toBe(a.agentUser!);
        expect(a.agentUser).toBe("istio-proxy");
        const problems = [
          ...differences("argv", a.envoyStart?.argv, b.envoyStart?.argv),
          ...differences("bootstrap", JSON.parse(a.envoyStart?.bootstrap ?? "null"), JSON.parse(b.envoyStart?.bootstrap ?? "null")),
        ];
        expect(problems).toEqual([]);
        expect(JSON.parse(a.envoyStart!.bootstrap!).node.metadata.ISTIO_VERSION).toBe("unknown");
        // The node is the VM's: sidecar~<ISTIO_SVC_IP>~<hostname -s>.<namespace>~<namespace>.svc.cluster.local
        const bootstrap = JSON.parse(b.envoyStart!.bootstrap!) as { node: { id: string } };
        expect(bootstrap.node.id).toBe(`sidecar~${VM_IP}~${VM_HOSTNAME}.${LITE_NAMESPACE}~${LITE_NAMESPACE}.svc.cluster.local`);
      });

      test("istiod receives the same Node over the same stream", () => {
        const [a, b] = [firstXds(runs.theirs!), firstXds(runs.ours!)];
        expect(a, explain(runs.theirs!)).toBeDefined();
        expect(b, explain(runs.ours!)).toBeDefined();
        expect(b!.method).toBe(a!.method);
        expect(differences("node", a!.node, b!.node)).toEqual([]);
        expect(b!.metadata.authorization).toEqual([`Bearer ${LITE_TOKEN}`]);
        expect(b!.metadata.authorization).toEqual(a!.metadata.authorization!);
      });

      test("fetches its certificate with the VM's token: same CSR, chain verified against the VM's root", () => {
        const [a, b] = [csrs(runs.theirs!), csrs(runs.ours!)];
        expect(b.length, explain(runs.ours!)).toBeGreaterThan(0);
        expect(a.length).toBeGreaterThan(0);
        expect(b[0]!.method).toBe(a[0]!.method);
        expect(b[0]!.metadata.authorization).toEqual(a[0]!.metadata.authorization!);
        expect(b[0]!.metadata.clusterid).toEqual(a[0]!.metadata.clusterid!);
        expect(csrFacts(b[0]!.request.csr)).toEqual(csrFacts(a[0]!.request.csr));
        expect(csrFacts(b[0]!.request.csr)).toContain(`URI:${LITE_SPIFFE}`);
        expect(b[0]!.request.validityDuration).toBe(a[0]!.request.validityDuration!);
        expect(runs.ours!.verify, explain(runs.ours!)).toBe(runs.theirs!.verify);
        const [ta, tb] = [runs.theirs!, runs.ours!];
        for (const f of ["cert-chain.pem", "key.pem"]) expect(tb.certFiles[f]).toBe(ta.certFiles[f]!);
        expect(ta.certFiles["key.pem"]).toBe("istio-proxy 600");
        // root-cert.pem (docs/compat.md, "found by the VM start suite"): Istio rewrites the
        // operator's file with its trust bundle re-joined without the final newline (same
        // certificate, one byte shorter, mode 0600); ours leaves a file holding the same
        // certificate as it is (istioctl's 0744).
        const vmRoot = readFileSync(join(vmFiles, "root-cert.pem"), "utf8");
        expect(ta.rootCert).toBe(vmRoot.trimEnd());
        expect(ta.certFiles["root-cert.pem"]).toBe("istio-proxy 600");
        expect(tb.rootCert).toBe(vmRoot);
        expect(tb.certFiles["root-cert.pem"]).toBe("istio-proxy 744");
      });

      test("readiness: 503 until Envoy has its configuration, then 200, for both", () => {
        // Sampled every ~0.3 s: a 503 phase shorter than that may go unseen, hence the suffix.
        for (const r of [runs.theirs!, runs.ours!]) expect([[503, 200], [200]], explain(r)).toContainEqual(r.readiness);
      });

      test("istio-start.sh programs the same capture rules through it, and `clean` removes them", () => {
        const [a, b] = [runs.theirs!, runs.ours!];
        // The same rules, in another backend (docs/compat.md, "found by the VM start suite"):
        // istio-start.sh runs `istio-iptables --cleanup-only`, then `istio-iptables`; the probe of
        // Istio's first run leaves an empty legacy nat table, which its "3 lines of
        // iptables-legacy-save" heuristic takes for existing rules, so its second run programs
        // legacy on a host whose iptables is nft. Ours counts rules and stays on nft.
        expect(a.rules.legacy).toContain("-A ISTIO_OUTPUT -m owner --uid-owner 999 -j RETURN");
        expect(b.rules.nft).toBe(a.rules.legacy);
        expect(a.rules.nft).not.toContain("-A ");
        expect(b.rules.legacy).not.toContain("-A ");
        // The proxy's uid is istio-proxy's, looked up (useradd gave it 999), not 1337.
        expect(b.rules.nft).toContain("--uid-owner 999");
        for (const r of [a, b]) for (const backend of [r.rulesAfterClean.nft, r.rulesAfterClean.legacy]) expect(backend).not.toContain("-A ");
      });

      test("SIGTERM: same exit code, Envoy gone", () => {
        const [a, b] = [runs.theirs!, runs.ours!];
        expect(a.exitCode).toBe(0);
        expect(b.exitCode, explain(b)).toBe(a.exitCode!);
        // After the drain Istio SIGKILLs Envoy, we SIGTERM it first (docs/compat.md).
        expect(a.envoySignals).toEqual([]);
        expect(b.envoySignals).toEqual(["SIGTERM"]);
        expect(a.envoyGoneAfterExit).toBe(true);
        expect(b.envoyGoneAfterExit).toBe(true);
      });
    });
  },
);
