// 20,000 connections to the compiled agent's XDS socket from a UID outside XDS_AUTHORIZED_UIDS
// (uid 4242, run with setpriv). What must hold: every one is refused and counted
// (istio_agent_xds_rejected_peers), the refusal lines are rate limited (the first 10 of each 10 s
// window), and none is lost silently: the lines written plus their `suppressed=` counts add up to
// 20,000 once the window has ended; an allowed client (root) is served after the flood.
import { afterAll, beforeAll, expect } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestPki } from "../support/fake-istiod.ts";
import { testRequiring } from "../support/requires.ts";
import type { Pod } from "../e2e/pod.ts";
import { startProxylessPod } from "../faults/proxyless-pod.ts";

const NEEDS = { root: true, tools: ["setpriv"], apt: ["util-linux"] };
const FLOOD = 20_000;

let work: string;
let pod: Pod | undefined;

/** Opens `total` connections, 200 at a time; prints how many got bytes back (served) and how many were closed without (refused). */
const CLIENT = `
const net = require("node:net");
const [path, total] = [process.argv[2], Number(process.argv[3])];
let started = 0, refused = 0, served = 0;
const preface = "PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + "\\x00\\x00\\x00\\x04\\x00\\x00\\x00\\x00\\x00";
function one() {
  if (started >= total) return;
  started++;
  let got = 0;
  const s = net.connect(path);
  s.on("connect", () => s.write(preface));
  s.on("data", (d) => { got += d.length; s.destroy(); });
  s.on("error", () => {});
  s.on("close", () => {
    if (got > 0) served++; else refused++;
    if (served + refused === total) { console.log(JSON.stringify({ served, refused })); process.exit(0); }
    one();
  });
}
for (let i = 0; i < Math.min(200, total); i++) one();
`;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "agent-peer-flood-"));
  chmodSync(work, 0o755);
  writeFileSync(join(work, "client.cjs"), CLIENT);
  chmodSync(join(work, "client.cjs"), 0o644);
}, 30_000);

afterAll(() => {
  pod?.kill();
  pod?.box.cleanup();
  rmSync(work, { recursive: true, force: true });
});

async function connectMany(socket: string, total: number, asUid?: number): Promise<{ served: number; refused: number }> {
  const script = join(work, "client.cjs");
  const cmd =
    asUid === undefined
      ? [process.execPath, script, socket, String(total)]
      : ["setpriv", `--reuid=${asUid}`, `--regid=${asUid}`, "--clear-groups", process.execPath, script, socket, String(total)];
  const p = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_INSTALL_CACHE_DIR: "/tmp" } });
  const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
  await p.exited;
  try {
    return JSON.parse(out.trim()) as { served: number; refused: number };
  } catch {
    throw new Error(`client as uid ${asUid ?? "root"}: ${out}\n${err}`);
  }
}

function refusalCounts(p: Pod): { written: number; suppressed: number } {
  const lines = p.agent
    .output()
    .split("\n")
    .filter((l) => l.includes("rejected connection on") && l.includes("uid=4242"));
  return { written: lines.length, suppressed: lines.reduce((n, l) => n + Number(/suppressed=(\d+)/.exec(l)?.[1] ?? 0), 0) };
}

testRequiring(
  NEEDS,
  `${FLOOD.toLocaleString("en")} connections from a refused UID: all refused and counted, at most 10 lines a window, the rest reported with suppressed=; root served after`,
  async () => {
    const pki = makeTestPki(join(work, "pki"));
    pod = await startProxylessPod(pki, "127.0.0.1:1", { env: { XDS_AUTHORIZED_UIDS: "0" } });
    for (const d of [pod.box.dir, pod.path("etc"), pod.path("etc/istio"), pod.path("etc/istio/proxy")]) chmodSync(d, 0o755);
    const socket = pod.path("etc/istio/proxy/XDS");
    const t0 = performance.now();
    expect(await connectMany(socket, FLOOD, 4242)).toEqual({ served: 0, refused: FLOOD });
    const floodMs = performance.now() - t0;
    expect(await connectMany(socket, 1)).toEqual({ served: 1, refused: 0 }); // the sentinel: an allowed peer after the flood
    const first = refusalCounts(pod);
    expect(first.written).toBeLessThanOrEqual(11);
    // The window's report comes when it ends (10 s after its first line): wait for the sum.
    let c = first;
    for (let waited = 0; c.written + c.suppressed < FLOOD && waited < 15_000; waited += 250) {
      await Bun.sleep(250);
      c = refusalCounts(pod);
    }
    expect(c.written + c.suppressed).toBe(FLOOD);
    expect(c.written).toBeLessThanOrEqual(2 * 10 + 2); // the flood may straddle two windows
    const metrics = await (await fetch(`http://127.0.0.1:${pod.statusPort}/stats/prometheus`)).text();
    expect(Number(/^istio_agent_xds_rejected_peers(?:_total)? (\d+)$/m.exec(metrics)?.[1])).toBe(FLOOD);
    expect(pod.exitCode()).toBeNull();
    console.log(`peer refusal flood: ${FLOOD} refused in ${floodMs.toFixed(0)} ms; ${c.written} lines written, ${c.suppressed} counted in them`);
  },
  90_000,
);
