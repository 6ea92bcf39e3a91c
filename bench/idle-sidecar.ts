// A/B of a settled sidecar's private memory (issue 29), in bench/podcost.ts's sidecar shape:
// istiod-lite (Istio's discovery server and CA), the stand-in Envoy with its ADS stream and both
// SDS streams open, the workload certificate issued. IDLE_COUNT agents of every build alive at
// once (started in turns), settled IDLE_SETTLE_MS after the last is ready; per build the median over
// its agents of USS (Private_Clean + Private_Dirty) and of its split by mapping (bench/smaps.ts):
// the allocator's arena (the 1 GiB reservation), JavaScriptCore's structure heap (the 4 GiB one),
// JIT code, thread stacks, the binary's written pages, the rest; threads by name.
// A build is `label=path`, optionally with environment after `?` (`x=dist/agent?BUN_JSC_foo=1`).
//   IDLE_AGENTS="main=/tmp/agent-main,new=dist/agent" IDLE_COUNT=10 bun bench/idle-sidecar.ts
// Not part of `bun run bench` (a comparison of builds, like idle-status.ts).

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startIstiodLite } from "../test/interop/support/istiod-lite.ts";
import { readStandinRecords } from "../test/interop/support/envoy-standin.ts";
import { loadavg, ussKiB } from "./idle-ab-support.ts";
import { waitFor } from "./pilotagent.ts";
import { ready, sidecarEnv } from "./podcost.ts";
import { classify, threads } from "./smaps.ts";
import { fmt, type Proc } from "./support.ts";

const COUNT = Number(process.env.IDLE_COUNT ?? 10);
const SETTLE_MS = Number(process.env.IDLE_SETTLE_MS ?? 30_000);
const READINGS = 3;
const READING_GAP_MS = 5000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** `label=path?ENV=V&...` builds. */
function builds(): { label: string; bin: string; env: Record<string, string> }[] {
  return (process.env.IDLE_AGENTS ?? `current=${join(import.meta.dir, "../dist/agent")}`).split(",").map((spec) => {
    const i = spec.indexOf("=");
    const [path, query] = spec.slice(i + 1).split("?") as [string, string | undefined];
    return { label: spec.slice(0, i), bin: resolve(path), env: Object.fromEntries(new URLSearchParams(query ?? "")) };
  });
}

/** The mapping groups a row reports, in MiB of private pages. */
const GROUPS = ["arena", "structures", "jit", "stacks", "binary", "other"] as const;
function split(pid: number): Record<(typeof GROUPS)[number], number> & { threads: string } {
  const r = { arena: 0, structures: 0, jit: 0, stacks: 0, binary: 0, other: 0 };
  for (const { name, m } of classify(pid)) {
    const g =
      name === "anon rw-p 1 GiB"
        ? "arena"
        : name === "anon rw-p 4 GiB"
          ? "structures"
          : name.startsWith("anon executable")
            ? "jit"
            : name.startsWith("stack")
              ? "stacks"
              : name.startsWith("binary")
                ? "binary"
                : "other";
    r[g] += m.ussKiB / 1024;
  }
  const names = threads(pid).map((t) => t.comm.replace(/\d+$/, "N"));
  const counts = new Map<string, number>();
  for (const n of names) counts.set(n, (counts.get(n) ?? 0) + 1);
  return { ...r, threads: `${names.length}: ${[...counts].map(([n, c]) => (c > 1 ? `${n}×${c}` : n)).join(", ")}` };
}

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "agent-idle-sidecar-"));
  const lite = await startIstiodLite();
  const procs: Proc[] = [];
  const standins = () =>
    procs.flatMap((_, i) =>
      readStandinRecords(join(dir, `p${i}`, "standin.jsonl"))
        .filter((r) => r.event === "start")
        .map((r) => r.pid),
    );
  const bs = builds();
  const pods: { build: number; proc: Proc; records: string }[] = [];
  try {
    const load0 = loadavg();
    for (let n = 0; n < COUNT; n++)
      for (const [b, build] of bs.entries()) {
        const d = join(dir, `p${pods.length}`);
        const { env, records } = await sidecarEnv(d, lite, false);
        const proc = Bun.spawn([build.bin, "proxy", "sidecar"], { cwd: d, env: { ...env, ...build.env }, stdout: "ignore", stderr: "ignore" });
        procs.push(proc);
        pods.push({ build: b, proc, records });
        await waitFor(`${build.label} #${n}: ready`, () => ready(records), proc, 120_000);
      }
    await Bun.sleep(SETTLE_MS);
    const loadMem = loadavg();
    const readings = pods.map(() => [] as { uss: number; split: ReturnType<typeof split> }[]);
    for (let r = 0; r < READINGS; r++) {
      if (r) await Bun.sleep(READING_GAP_MS);
      pods.forEach((p, i) => readings[i]!.push({ uss: ussKiB(p.proc.pid) / 1024, split: split(p.proc.pid) }));
    }
    const rows = bs.map((build, b) => {
      const mine = readings.filter((_, i) => pods[i]!.build === b);
      const med = (f: (x: { uss: number; split: ReturnType<typeof split> }) => number) => median(mine.map((rs) => median(rs.map(f))));
      const env = Object.entries(build.env)
        .map(([k, v]) => `${k}=${v}`)
        .join(" ");
      // Only a Bun process has the allocator's and the structures' reservations; in a Go process the
      // threads' stack pointers lie in Go's heap (goroutine stacks), so the split means nothing there.
      const bun = med((x) => x.split.arena) > 0;
      const cols = GROUPS.map((g) =>
        bun
          ? fmt(
              med((x) => x.split[g]),
              2,
            )
          : "—",
      ).join(" | ");
      const uss = fmt(
        med((x) => x.uss),
        2,
      );
      return `| ${build.label}${env ? ` (${env})` : ""} | ${uss} | ${cols} | ${mine[0]![0]!.split.threads} |`;
    });
    return [
      "## Settled sidecar, private memory by build (bench/idle-sidecar.ts)",
      "",
      `${COUNT} sidecars of each build alive at once (podcost's shape: istiod-lite, the stand-in Envoy's ADS and SDS streams open, certificate issued), ${SETTLE_MS / 1000} s after the last was ready; ` +
        `per build the median over its agents of the median of ${READINGS} readings ${READING_GAP_MS / 1000} s apart, MiB. Load average: ${load0} at the start, ${loadMem} at the readings, ${loadavg()} at the end.`,
      "",
      `| build | USS | ${GROUPS.join(" | ")} | threads |`,
      `|---|---|${GROUPS.map(() => "---|").join("")}---|`,
      ...rows,
      "",
    ].join("\n");
  } finally {
    const extra = standins();
    for (const p of procs) p.kill("SIGKILL");
    for (const pid of extra)
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    await Promise.all(procs.map((p) => p.exited));
    await lite.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) console.log(await run());
