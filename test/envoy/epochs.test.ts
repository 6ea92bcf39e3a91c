import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { harness, within, type Harness } from "./harness.ts";
import type { FakeEnvoyRecord } from "../support/fake-envoy.ts";

let h: Harness | undefined;
const dirs: string[] = [];
afterEach(() => {
  h?.cleanup();
  h = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function until(what: string, cond: () => boolean, ms = 8000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

const starts = (h: Harness): FakeEnvoyRecord[] => h.records().filter((r) => r.event === "start");

async function hotHarness(): Promise<{ h: Harness; cert: string }> {
  const dir = mkdtempSync(join(tmpdir(), "envoy-cert-"));
  dirs.push(dir);
  const cert = join(dir, "cert-chain.pem");
  writeFileSync(cert, "one");
  const hh = await harness({ options: { hotRestart: { watchFiles: [cert], pollIntervalMs: 40, parentShutdownS: 60 } } });
  return { h: hh, cert };
}

test("hot restart: a watched file change starts epoch N+1; at most two epochs; shutdown ends all", async () => {
  const { h: hh, cert } = await hotHarness();
  h = hh;
  await h.sup.start(new AbortController().signal);
  await until("epoch 0", () => starts(hh).length === 1);
  const e0 = starts(hh)[0]!;
  expect(e0.argv).not.toContain("--disable-hot-restart");
  const i = e0.argv!.indexOf("--restart-epoch");
  expect(e0.argv!.slice(i, i + 4)).toEqual(["--restart-epoch", "0", "--parent-shutdown-time-s", "60"]);

  writeFileSync(cert, "two");
  await until("epoch 1", () => starts(hh).length === 2);
  const e1 = starts(hh)[1]!;
  expect(e1.epoch).toBe(1);
  expect(e1.argv).toContain("--restart-epoch");
  expect(h.sup.pids).toEqual([e0.pid, e1.pid]);
  expect(h.sup.state).toBe("running");

  writeFileSync(cert, "three");
  await until("epoch 2", () => starts(hh).length === 3);
  const rec = h.records();
  const e2 = starts(hh)[2]!;
  expect(e2.epoch).toBe(2);
  // Epoch 0 was told to stop and had exited before epoch 2 started.
  const e0Exit = rec.findIndex((r) => r.pid === e0.pid && r.event === "exit");
  expect(e0Exit).toBeGreaterThanOrEqual(0);
  expect(e0Exit).toBeLessThan(rec.findIndex((r) => r.pid === e2.pid && r.event === "start"));
  await until("epoch 0 reaped", () => h!.sup.pids.length === 2);
  expect(h.sup.pids).toEqual([e1.pid, e2.pid]);

  await within(h.sup.shutdown({ immediate: true }), 5000, "shutdown");
  expect(await h.sup.exited).toBe(0);
  const after = h.records();
  for (const pid of [e1.pid, e2.pid]) expect(after.some((r) => r.pid === pid && r.event === "signal" && r.signal === "SIGTERM")).toBe(true);
  expect(h.sup.pids).toEqual([]);
});

test("hot restart: the parent epoch ending is normal; the supervisor ends with the last epoch", async () => {
  const { h: hh, cert } = await hotHarness();
  h = hh;
  await h.sup.start(new AbortController().signal);
  await until("epoch 0", () => starts(hh).length === 1);
  writeFileSync(cert, "changed");
  await until("epoch 1", () => starts(hh).length === 2);
  const [e0, e1] = starts(hh);
  process.kill(e0!.pid, "SIGTERM"); // what Envoy's child does to its parent after parent-shutdown-time
  await until("epoch 0 gone", () => h!.sup.pids.length === 1);
  expect(h.sup.state).toBe("running");
  process.kill(e1!.pid, "SIGTERM");
  expect(await within(h.sup.exited, 5000, "exit")).toBe(0);
  expect(starts(hh)).toHaveLength(2);
});

test("hot restart: when the newest epoch crashes the older one is stopped and Envoy starts over at epoch 0", async () => {
  const { h: hh, cert } = await hotHarness();
  h = hh;
  await h.sup.start(new AbortController().signal);
  await until("epoch 0", () => starts(hh).length === 1);
  writeFileSync(cert, "changed");
  await until("epoch 1", () => starts(hh).length === 2);
  const [e0, e1] = starts(hh);
  process.kill(e1!.pid, "SIGKILL");
  await until("restart", () => starts(hh).length === 3);
  const rec = h.records();
  expect(rec.some((r) => r.pid === e0!.pid && r.event === "signal" && r.signal === "SIGTERM")).toBe(true);
  expect(starts(hh)[2]!.epoch).toBe(0);
  expect(h.lines.some((l) => l.includes("possibly OOM-killed"))).toBe(true);
  await h.sup.shutdown({ immediate: true });
});
