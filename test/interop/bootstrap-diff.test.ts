// Differential: our agent and Istio's pilot-agent started one after the other on the same
// generated pod environment (fresh directories, identical env, the same istiod-lite address and
// ports), each with the interop stand-in as Envoy. Envoy's arguments, the bootstrap it was given
// (envoy-rev.json, including the Node istiod will receive) and grpc-bootstrap.json must be equal
// after the normalisation below; known, reported differences are listed in EXPECTED with their
// reason (docs/compat.md, "found by the differential suite"). INTEROP_SEED picks the corpus,
// INTEROP_BOOTSTRAP_CASES its size (default 200).

import { afterAll, beforeAll, expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { freePort } from "../e2e/pod.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { startIstiodLite, LITE_TOKEN, type IstiodLite } from "./support/istiod-lite.ts";
import { istioBootstrapTemplate, runAgentUntilEnvoy } from "./support/agent-run.ts";
import { comparableDocs as docs, ENVOY_EXPECTED, type Expected } from "./support/bootstrap-expected.ts";
import { podCase, type PodCase } from "./support/bootstrap-corpus.ts";
import { jsonDiff, showValue, type JsonDifference } from "./support/json-diff.ts";
import { corpusSeed, mapLimit, seededRng } from "./support/seeded.ts";

/**
 * Known differences, each reported in docs/compat.md. `path` matches the JSON path of a
 * difference in the named document; `applies` narrows it to the cases it concerns.
 */
export const EXPECTED: Expected<PodCase>[] = [...ENVOY_EXPECTED];

const reproduce = (c: PodCase): string =>
  [...Object.entries(c.env).map(([k, v]) => `${k}='${v.replace(/'/g, `'\\''`)}'`), "<agent>", ...c.args].join(" ") +
  (Object.keys(c.files).length ? `  (files: ${JSON.stringify(c.files)})` : "");

describeRequiring({ check: interopUnmet }, "bootstrap differential: ours vs Istio's pilot-agent on generated pod environments", () => {
  let lite: IstiodLite;
  const seed = corpusSeed(20260826);
  const size = Number(process.env.INTEROP_BOOTSTRAP_CASES ?? 200);
  const rng = seededRng(seed);
  const cases = Array.from({ length: size }, (_, i) => podCase(rng, i));

  beforeAll(async () => {
    lite = await startIstiodLite("");
  }, 90_000);
  afterAll(async () => {
    await lite?.stop();
  });

  test(`${size} generated pod environments (seed ${seed}): same Envoy arguments, bootstrap and gRPC bootstrap`, async () => {
    requireBinary();
    console.log(`bootstrap differential: seed ${seed} (INTEROP_SEED=${seed} reproduces), ${cases.length} cases`);
    const template = istioBootstrapTemplate();
    const failures: string[] = [];
    const seenExpected = new Map<string, number>();
    let compared = 0;
    await mapLimit(cases, 4, async (c) => {
      const ports: Record<string, string> = {
        "<STATUS>": String(await freePort()),
        "<ADMIN>": String(await freePort()),
        "<DNS>": String(await freePort()),
        "<XDS>": lite.xdsAddress,
      };
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(c.env)) {
        let x = v;
        for (const [mark, val] of Object.entries(ports)) x = x.replaceAll(`"${mark}"`, mark === "<XDS>" ? JSON.stringify(val) : val).replaceAll(mark, val);
        env[k] = x;
      }
      env.CA_ADDR = lite.caAddress;
      const files = { ...c.files, "var/run/secrets/tokens/istio-token": LITE_TOKEN, "var/run/secrets/istio/root-cert.pem": lite.rootPem };
      const run = (bin: string) => runAgentUntilEnvoy({ bin, args: c.args, env, files, template, until: c.proxyless ? "grpc-bootstrap" : "envoy" });
      const theirs = await run(PILOT_AGENT);
      const ours = await run(DIST_AGENT);
      const a = docs(theirs);
      const b = docs(ours);
      const problems: string[] = [];
      const startedA = c.proxyless ? a.grpc !== undefined : a.argv !== undefined;
      const startedB = c.proxyless ? b.grpc !== undefined : b.argv !== undefined;
      const startExpected = EXPECTED.find((x) => x.doc === "start" && (x.applies?.(c) ?? true));
      if (startedA !== startedB && startExpected) {
        seenExpected.set(startExpected.reason, (seenExpected.get(startExpected.reason) ?? 0) + 1);
      } else if (startedA !== startedB) {
        problems.push(
          `Istio ${startedA ? "started" : `did not start (exit ${theirs.exit})`}, ours ${startedB ? "started" : `did not start (exit ${ours.exit})`}`,
        );
        if (!startedA) problems.push(`Istio's log tail:\n${theirs.log.split("\n").slice(-6).join("\n")}`);
        if (!startedB) problems.push(`our log tail:\n${ours.log.split("\n").slice(-6).join("\n")}`);
      } else if (startedA) {
        compared++;
        for (const doc of ["argv", "bootstrap", "grpc"] as const) {
          const diffs: JsonDifference[] = jsonDiff(a[doc], b[doc]).filter((d) => {
            const e = EXPECTED.find((x) => x.doc === doc && x.path.test(d.path) && (x.applies?.(c) ?? true));
            if (e) seenExpected.set(e.reason, (seenExpected.get(e.reason) ?? 0) + 1);
            return !e;
          });
          for (const d of diffs.slice(0, 12)) problems.push(`${doc} ${d.path}: Istio ${showValue(d.theirs)}, ours ${showValue(d.ours)}`);
          if (diffs.length > 12) problems.push(`${doc}: ${diffs.length - 12} more`);
        }
      }
      if (problems.length) failures.push(`${reproduce(c)}\n  ${problems.join("\n  ")}`);
    });
    for (const [reason, n] of seenExpected) console.log(`bootstrap differential: expected difference seen in ${n} places: ${reason}`);
    if (failures.length)
      console.log(
        `bootstrap differential: ${failures.length}/${cases.length} cases differ (seed ${seed}); first ones:\n\n${failures.slice(0, 6).join("\n\n")}`,
      );
    expect(failures.length).toBe(0);
    // Most cases must actually have produced something to compare.
    expect(compared).toBeGreaterThan(cases.length * 0.8);
  }, 1_800_000);
});
