// A stale Envoy from an earlier run (recorded in envoy.pid) is stopped at start; a pid reused by an
// unrelated process, or a process that is not the recorded binary, is left alone. Real processes.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { EnvoyPidFile } from "../../src/envoy/pidfile.ts";

const dir = mkdtempSync(join(tmpdir(), "pidfile-"));
const procs: ReturnType<typeof Bun.spawn>[] = [];
afterAll(() => {
  for (const p of procs) p.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

function pidFile(name: string) {
  const { sink, lines } = memoryLogger("all:debug");
  const signals: [number, string][] = [];
  const f = new EnvoyPidFile(join(dir, name), {
    log: sink.logger(),
    kill: (pid, sig) => {
      signals.push([pid, sig]);
      try {
        process.kill(pid, sig);
        return true;
      } catch {
        return false;
      }
    },
    sleep: (ms) => Bun.sleep(ms),
    graceMs: 300,
  });
  return { f, lines, signals };
}

/** `sleep 300` (optionally ignoring SIGTERM), once it has exec'd (its cmdline names /bin/sleep). */
async function sleeper(ignoreTerm = false): Promise<ReturnType<typeof Bun.spawn>> {
  const p = ignoreTerm ? Bun.spawn(["/bin/sh", "-c", "trap '' TERM; exec /bin/sleep 300"]) : Bun.spawn(["/bin/sleep", "300"]);
  procs.push(p);
  for (let i = 0; i < 200 && !readFileSync(`/proc/${p.pid}/cmdline`, "utf8").startsWith("/bin/sleep\0"); i++) await Bun.sleep(10);
  return p;
}

function startTime(pid: number): string {
  const s = readFileSync(`/proc/${pid}/stat`, "utf8");
  return s.slice(s.lastIndexOf(")") + 2).split(" ")[19]!;
}

describe("Envoy pid file", () => {
  test("record writes pid, start time and binary; clear removes it", async () => {
    const p = await sleeper();
    const { f } = pidFile("a.pid");
    f.record(p.pid, "/bin/sleep");
    expect(readFileSync(join(dir, "a.pid"), "utf8")).toBe(`${p.pid} ${startTime(p.pid)} /bin/sleep\n`);
    f.clear();
    expect(existsSync(join(dir, "a.pid"))).toBe(false);
  });

  test("a recorded Envoy still running is stopped with SIGTERM", async () => {
    const p = await sleeper();
    const { f } = pidFile("b.pid");
    f.record(p.pid, "/bin/sleep");
    expect(await pidFile("b.pid").f.stopStale()).toBe(p.pid);
    expect(await p.exited).toBeDefined();
    expect(p.signalCode).toBe("SIGTERM");
    expect(existsSync(join(dir, "b.pid"))).toBe(false);
  });

  test("one that ignores SIGTERM gets SIGKILL after the grace", async () => {
    const p = await sleeper(true);
    const { f } = pidFile("c.pid");
    f.record(p.pid, "/bin/sleep");
    const second = pidFile("c.pid");
    expect(await second.f.stopStale()).toBe(p.pid);
    expect(second.signals).toEqual([
      [p.pid, "SIGTERM"],
      [p.pid, "SIGKILL"],
    ]);
    await p.exited;
    expect(p.signalCode).toBe("SIGKILL");
  });

  test("a pid now used by another process (other start time) is left alone", async () => {
    const p = await sleeper();
    writeFileSync(join(dir, "d.pid"), `${p.pid} 1 /bin/sleep\n`);
    const { f, signals } = pidFile("d.pid");
    expect(await f.stopStale()).toBeUndefined();
    expect(signals).toEqual([]);
    expect(p.exitCode).toBeNull();
    expect(p.signalCode).toBeNull();
  });

  test("a process that is not the recorded binary is left alone", async () => {
    const p = await sleeper();
    writeFileSync(join(dir, "e.pid"), `${p.pid} ${startTime(p.pid)} /usr/local/bin/envoy\n`);
    const { f, signals } = pidFile("e.pid");
    expect(await f.stopStale()).toBeUndefined();
    expect(signals).toEqual([]);
  });

  test("garbage in the file is ignored with a warning naming it", async () => {
    writeFileSync(join(dir, "f.pid"), "not a pid file");
    const { f, lines } = pidFile("f.pid");
    expect(await f.stopStale()).toBeUndefined();
    expect(lines.some((l) => l.includes(`ignoring ${join(dir, "f.pid")}`))).toBe(true);
  });
});
