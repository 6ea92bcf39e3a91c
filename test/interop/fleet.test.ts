// The fleet benchmark's behaviour at a small N (bench/fleet.ts measures the speed): a few pods of
// our compiled agent against one istiod-lite (Istio's discovery server and CA), each pod with its
// own identity, every pod's Envoy played by fleet-envoy (Go, one process, recording every
// response each pod ACKed). Started all at once, then changes at istiod, then an istiod
// restart. Every pod must have ACKed every change; istiod must have seen exactly one CSR and one
// xDS stream per pod (plus one stream per pod after the restart), and nothing else; the restart
// must leave each pod with the resources it had, none lost and none added.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { interopUnmet } from "./support/go-build.ts";
import { istioBootstrapTemplate } from "./support/agent-run.ts";
import { Fleet, type PodDump } from "./support/fleet.ts";

const PODS = 4;
const SMALL = 3;
const LARGE = 2;
const MESH = { services: 24, endpointsPerService: 3, namespaces: 4, serviceEntries: 4 };

/** Resource names each pod holds, per type. */
const names = (pods: Record<string, PodDump>) =>
  Object.fromEntries(Object.entries(pods).map(([id, d]) => [id, Object.fromEntries(Object.entries(d.state).map(([t, m]) => [t, Object.keys(m).sort()]))]));

describeRequiring({ check: interopUnmet }, "fleet: a few pods of our agent against Istio's discovery server and CA", () => {
  const work = mkdtempSync(join(tmpdir(), "agent-fleet-"));
  let fleet: Fleet;
  const marks: string[] = [];
  let before: Record<string, PodDump>;
  let after: Record<string, PodDump>;
  let counts: ReturnType<Fleet["counts"]>;
  let countsBeforeRestart: ReturnType<Fleet["counts"]>;
  let countersBefore: Awaited<ReturnType<Fleet["counters"]>>;
  let countersAfter: Awaited<ReturnType<Fleet["counters"]>>;

  beforeAll(async () => {
    requireBinary();
    fleet = await Fleet.start({ bin: DIST_AGENT, pods: PODS, mode: "delta", mesh: MESH, work: join(work, "fleet"), template: istioBootstrapTemplate() });
    await fleet.storm(40_000);
    for (let i = 0; i < SMALL; i++) marks.push((await fleet.change("small", 0, 20_000)).id);
    for (let i = 0; i < LARGE; i++) marks.push((await fleet.change("large", 10, 20_000)).id);
    countsBeforeRestart = fleet.counts();
    countersBefore = await fleet.counters();
    before = await fleet.dump();
    const r = await fleet.restart(30_000);
    // Sentinel: one more change after the restart reached every pod, so the restart's pushes are done.
    marks.push((await fleet.change("small", 0, 20_000)).id);
    after = await fleet.dump(r.tStop);
    counts = fleet.counts();
    countersAfter = await fleet.counters();
  }, 150_000);

  afterAll(async () => {
    await fleet?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("every pod ACKed every change pushed, and NACKed nothing", () => {
    expect(marks.length).toBe(SMALL + LARGE + 1);
    for (const d of Object.values(after)) {
      expect(d.seen.sort()).toEqual([...marks].sort());
      expect(d.nacked).toEqual({});
    }
    expect(Object.keys(after).sort()).toEqual(Array.from({ length: PODS }, (_, i) => `p${i}`).sort());
  });

  test("istiod saw exactly one CSR per pod, and one xDS stream per pod until it restarted", () => {
    const want = (prefix: string, n: number) => new Map(Array.from({ length: PODS }, (_, i) => [`${prefix}-${i}`, n]));
    const sortMap = (m: Map<string, number>) => new Map([...m].sort());
    expect(sortMap(countsBeforeRestart.csrs)).toEqual(sortMap(want("pod", 1)));
    expect(sortMap(countsBeforeRestart.streams)).toEqual(sortMap(want("fleet", 1)));
    expect(sortMap(counts.csrs)).toEqual(sortMap(want("pod", 1)));
    expect(sortMap(counts.streams)).toEqual(sortMap(want("fleet", 2)));
    expect(counts.unknown).toBe(0);
    // istiod-lite's own counters say the same; the restarted process saw one stream per pod and no CSR.
    expect(sortMap(countersBefore.csrs)).toEqual(sortMap(want("pod", 1)));
    expect(sortMap(countersBefore.streams)).toEqual(sortMap(want("fleet", 1)));
    expect(countersAfter.csrs).toEqual(new Map());
    expect(sortMap(countersAfter.streams)).toEqual(sortMap(want("fleet", 1)));
  });

  test("after istiod's restart every pod holds the resources it held before, none lost, none added", () => {
    const b = names(before);
    const a = names(after);
    for (const id of Object.keys(b)) {
      expect(a[id]!["Cluster"]).toEqual(b[id]!["Cluster"]!);
      expect(a[id]!["Listener"]).toEqual(b[id]!["Listener"]);
      expect(a[id]!["ClusterLoadAssignment"]).toEqual(b[id]!["ClusterLoadAssignment"]);
      expect(a[id]!["RouteConfiguration"]).toEqual(b[id]!["RouteConfiguration"]);
      expect(a[id]!["Secret"]).toEqual(["ROOTCA", "default"]);
      expect(b[id]!["Cluster"]!.length).toBeGreaterThan(MESH.services / 2);
    }
  });
});
