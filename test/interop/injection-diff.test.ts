// Differential on pods rendered by Istio's own injector: generated Deployments
// (support/injection-corpus.ts) go through test/interop/injector (pkg/kube/inject over the
// chart the oracle's module carries), and each rendered pod's istio-proxy container is started
// the way the kubelet would start it (support/kubelet.ts: env from the downward API and resource
// limits, $(VAR) expansion, the volumes as directories) in the pod's own network namespace,
// once with Istio's pilot-agent and once with ours. Compared for every pod: Envoy's arguments,
// the bootstrap (with the Node istiod receives) and the gRPC bootstrap; and the init
// container's (istio-init, or istio-validation with CNI) capture as a dry run: the
// iptables-restore inputs or the nftables transaction. INTEROP_SEED picks the corpus,
// INTEROP_INJECTION_CASES its size (default 200).
//
// Sandboxed, the same for both agents: ProxyConfig's binaryPath is the recording Envoy stand-in,
// the version stamp and cloud platform are fixed (docs/interop.md, Normalisation).

import { afterAll, beforeAll, expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { istioBootstrapTemplate, runAgentUntilEnvoy } from "./support/agent-run.ts";
import { comparableDocs, ENVOY_EXPECTED, type Expected } from "./support/bootstrap-expected.ts";
import { istioNftTranscript, transcriptOf } from "./support/capture-corpus.ts";
import { INSTALLS, workloadCase, type WorkloadCase } from "./support/injection-corpus.ts";
import { renderWorkloads, type Rendered } from "./support/injector.ts";
import { container, mountVolumes, podOf, processOf } from "./support/kubelet.ts";
import { identityFor, proxyProcess } from "./support/injection-pod.ts";
import { jsonDiff, showValue } from "./support/json-diff.ts";
import { startPodNetns } from "./support/pod-netns.ts";
import { selfSignedCert } from "../support/self-signed.ts";
import { corpusSeed, mapLimit, seededRng } from "./support/seeded.ts";

/** Known differences on injector-rendered pods beyond the bootstrap differential's (docs/compat.md). */
const EXPECTED: Expected<WorkloadCase>[] = [...ENVOY_EXPECTED];

/** Our extra config line of a dry run (docs/compat.md). */
const OUR_EXTRA_CONFIG = /^IPTABLES_TRACE_LOGGING=/;

interface DryRun {
  code: number;
  out: string;
  log: string;
}

async function runIn(prefix: string[], argv: string[], env: Record<string, string>, cwd: string): Promise<DryRun> {
  const p = Bun.spawn([...prefix, ...argv], { cwd, env, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, log: out + "\n" + err };
}

describeRequiring(
  { root: true, tools: ["unshare", "nsenter", "ip", "nft", "openssl"], apt: ["util-linux", "iproute2", "nftables", "openssl"], check: interopUnmet },
  "injection differential: pods rendered by Istio's injector, ours vs Istio's pilot-agent",
  () => {
    const seed = corpusSeed(31);
    const size = Number(process.env.INTEROP_INJECTION_CASES ?? 200);
    const rng = seededRng(seed);
    const cases = Array.from({ length: size }, (_, i) => workloadCase(rng, i));
    let rendered: Rendered[] = [];
    let rootCert = "";

    beforeAll(async () => {
      rootCert = selfSignedCert("/O=cluster.local", 2).cert;
      rendered = await renderWorkloads(INSTALLS, cases);
    }, 120_000);

    test(`Istio's injector renders all ${size} generated workloads (seed ${seed})`, () => {
      const refused = rendered.filter((r) => r.error || !r.object).map((r) => `${r.name}: ${r.error}`);
      expect(refused).toEqual([]);
      const kinds = new Map<string, number>();
      for (const c of cases) kinds.set(`${c.kind}${c.native ? " (native)" : ""}`, (kinds.get(`${c.kind}${c.native ? " (native)" : ""}`) ?? 0) + 1);
      console.log(
        `injection differential: seed ${seed} (INTEROP_SEED=${seed} reproduces), ${size} workloads: ${[...kinds].map(([k, n]) => `${n} ${k}`).join(", ")}`,
      );
    });

    test(`${size} rendered pods: same Envoy arguments, bootstrap, gRPC bootstrap and init-container capture`, async () => {
      requireBinary();
      const template = istioBootstrapTemplate();
      const failures: string[] = [];
      const seenExpected = new Map<string, number>();
      let compared = 0;
      let captured = 0;
      const capturesRun = new Set<string>();
      await mapLimit(cases, 4, async (c, i) => {
        const r = rendered[i]!;
        if (!r.object) return;
        const pod = podOf(r.object, identityFor(c, i, rootCert));
        const proxy = container(pod, "istio-proxy")!;
        const proc = proxyProcess(pod);
        const proxyless = proc.env.DISABLE_ENVOY === "true";
        const netns = await startPodNetns(pod.id.podIP);
        const problems: string[] = [];
        try {
          const run = (bin: string) =>
            runAgentUntilEnvoy({
              bin,
              args: proc.args,
              env: proc.env,
              files: {},
              template,
              until: proxyless ? "grpc-bootstrap" : "envoy",
              prepare: (dir) => mountVolumes(pod, proxy, dir),
              prefix: netns.prefix,
              timeoutMs: 30_000,
            });
          const theirs = await run(PILOT_AGENT);
          const ours = await run(DIST_AGENT);
          const a = comparableDocs(theirs);
          const b = comparableDocs(ours);
          const startedA = proxyless ? a.grpc !== undefined : a.argv !== undefined;
          const startedB = proxyless ? b.grpc !== undefined : b.argv !== undefined;
          if (startedA !== startedB || !startedA) {
            problems.push(
              `Istio ${startedA ? "started" : `did not start (exit ${theirs.exit})`}, ours ${startedB ? "started" : `did not start (exit ${ours.exit})`}`,
            );
            if (!startedA) problems.push(`Istio's log tail:\n${theirs.log.split("\n").slice(-6).join("\n")}`);
            if (!startedB) problems.push(`our log tail:\n${ours.log.split("\n").slice(-6).join("\n")}`);
          } else {
            compared++;
            for (const doc of ["argv", "bootstrap", "grpc"] as const) {
              const diffs = jsonDiff(a[doc], b[doc]).filter((d) => {
                const e = EXPECTED.find((x) => x.doc === doc && x.path.test(d.path) && (x.applies?.(c) ?? true));
                if (e) seenExpected.set(e.reason, (seenExpected.get(e.reason) ?? 0) + 1);
                return !e;
              });
              for (const d of diffs.slice(0, 12)) problems.push(`${doc} ${d.path}: Istio ${showValue(d.theirs)}, ours ${showValue(d.ours)}`);
              if (diffs.length > 12) problems.push(`${doc}: ${diffs.length - 12} more`);
            }
          }
          // The init container's capture, as a dry run in the pod's namespace (after the agents:
          // Istio's nftables dry run programs the namespace it runs in).
          for (const init of (pod.spec.initContainers ?? []).filter((x) => x.name === "istio-init" || x.name === "istio-validation")) {
            const p = processOf(pod, init, "/");
            const argv = [...p.args, "--dry-run"];
            // Many pods share an init container's arguments and env: each distinct one is run once.
            const key = JSON.stringify([argv, Object.entries(p.env).filter(([k]) => k !== "HOSTNAME")]);
            if (capturesRun.has(key)) continue;
            capturesRun.add(key);
            const [ta, tb] = [await runIn(netns.prefix, [PILOT_AGENT, ...argv], p.env, "/"), await runIn(netns.prefix, [DIST_AGENT, ...argv], p.env, "/")];
            if ((ta.code === 0) !== (tb.code === 0))
              problems.push(`${init.name} ${argv.join(" ")}: exit Istio ${ta.code}, ours ${tb.code}\n${tb.log.slice(-600)}`);
            else if (ta.code === 0) {
              captured++;
              if (argv.includes("--native-nftables")) {
                const x = istioNftTranscript(ta.log) ?? "(none logged)";
                if (x !== tb.out.trim()) problems.push(`${init.name}: nftables transactions differ:\n--- Istio\n${x}\n--- ours\n${tb.out.trim()}`);
              } else {
                const x = transcriptOf(ta.log);
                const y = transcriptOf(tb.log);
                if (JSON.stringify(x.restores) !== JSON.stringify(y.restores))
                  problems.push(`${init.name}: restore inputs differ:\n--- Istio\n${x.restores.join("\n")}\n--- ours\n${y.restores.join("\n")}`);
                const ourConfig = y.config.filter((l) => !OUR_EXTRA_CONFIG.test(l));
                if (JSON.stringify(x.config) !== JSON.stringify(ourConfig))
                  problems.push(`${init.name}: config differs: Istio ${JSON.stringify(x.config)}, ours ${JSON.stringify(ourConfig)}`);
              }
            }
          }
        } finally {
          await netns.close();
        }
        if (problems.length) failures.push(`${c.name} (install ${c.install}): ${JSON.stringify(c.object)}\n  ${problems.join("\n  ")}`);
      });
      for (const [reason, n] of seenExpected) console.log(`injection differential: expected difference seen in ${n} places: ${reason}`);
      console.log(`injection differential: ${compared} pods compared, ${captured} distinct init-container captures compared`);
      if (failures.length)
        console.log(
          `injection differential: ${failures.length}/${cases.length} pods differ (seed ${seed}); first ones:\n\n${failures.slice(0, 6).join("\n\n")}`,
        );
      expect(failures.length).toBe(0);
      expect(compared).toBe(cases.length);
    }, 1_800_000);
  },
);
