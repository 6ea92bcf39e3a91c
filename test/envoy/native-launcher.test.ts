// Envoy's native launcher (native/envoylauncher.c), built here with gcc as build.ts builds it:
// what it does with its arguments (exec in place, same pid; Envoy's binary and the agent's pid
// checked, with a clear line and exit code otherwise), run from the memory file the agent puts it
// in; and the death-linked launcher falling back to the agent's copy when it cannot be spawned.
// That the compiled agent uses it, and that Envoy dies with the agent: test/faults/agent-killed.test.ts.

import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildLauncher } from "../../native/build-launcher.ts";
import { installLauncher, launcherBytes, launcherFileName } from "../../native/envoylauncher.ts";
import { nativeLinkedLauncher } from "../../src/envoy/deathlink.ts";
import type { LaunchSpec, Launcher } from "../../src/envoy/process.ts";
import { describeRequiring } from "../support/requires.ts";

const dir = mkdtempSync(join(tmpdir(), "agent-launcher-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(cmd: string[]): Promise<{ code: number; out: string; err: string; pid: number }> {
  const p = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err, pid: p.pid };
}

describeRequiring({ tools: ["gcc"], apt: ["gcc"] }, "native Envoy launcher", () => {
  const built = buildLauncher(process.arch, join(dir, "native"));
  const bin = "file" in built ? built.file : "";

  test("it is built as a static executable with no interpreter", () => {
    expect(built).toEqual({ file: join(dir, "native", launcherFileName()) });
    const elf = readFileSync(bin);
    expect([...elf.subarray(0, 4)]).toEqual([0x7f, 0x45, 0x4c, 0x46]);
    // No PT_INTERP: `file` would say "dynamically linked"; here the program headers are read.
    const phoff = Number(elf.readBigUInt64LE(0x20));
    const phnum = elf.readUInt16LE(0x38);
    const types = Array.from({ length: phnum }, (_, i) => elf.readUInt32LE(phoff + i * 56));
    expect(types).not.toContain(3); // PT_INTERP
    expect(types).not.toContain(2); // PT_DYNAMIC
  });

  test("with its parent's pid it becomes Envoy in place: same pid, arguments and environment as given", async () => {
    const script = join(dir, "envoy");
    writeFileSync(script, '#!/bin/sh\necho "$$|$1|$2|$LAUNCH_MARK"\n');
    chmodSync(script, 0o755);
    const p = Bun.spawn([bin, String(process.pid), script, "-c", "two words"], { stdout: "pipe", stderr: "pipe", env: { LAUNCH_MARK: "kept" } });
    const r = { out: await new Response(p.stdout).text(), err: await new Response(p.stderr).text(), code: await p.exited, pid: p.pid };
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out).toBe(`${r.pid}|-c|two words|kept\n`);
  });

  test("a parent that is not the agent named: exit 127 and why, Envoy never started", async () => {
    const r = await run([bin, "1", "/bin/echo", "started"]);
    expect(r.code).toBe(127);
    expect(r.out).toBe("");
    expect(r.err).toBe("__envoy-exec: cannot start Envoy /bin/echo: the agent (pid 1) died before Envoy started\n");
  });

  test("a missing or non-executable Envoy: exit 127 naming the binary and the errno", async () => {
    const missing = await run([bin, String(process.pid), "/nonexistent/envoy"]);
    expect(missing.code).toBe(127);
    expect(missing.err).toBe("__envoy-exec: cannot start Envoy /nonexistent/envoy: execve failed: no such file or directory (ENOENT)\n");
    const plain = join(dir, "not-executable");
    writeFileSync(plain, "x");
    const denied = await run([bin, String(process.pid), plain]);
    expect(denied.code).toBe(127);
    expect(denied.err).toBe(`__envoy-exec: cannot start Envoy ${plain}: execve failed: permission denied (EACCES)\n`);
  });

  test("bad usage: exit 2 with the usage line", async () => {
    for (const args of [[], ["123"], ["12x", "/bin/true"], ["", "/bin/true"]]) {
      const r = await run([bin, ...args]);
      expect(r.code).toBe(2);
      expect(r.err).toBe("__envoy-exec: usage: __envoy-exec <agent pid> <envoy binary> [args...]\n");
    }
  });

  test("installed in a memory file, it runs from /proc/self/fd/N; the descriptor does not reach Envoy", async () => {
    const bytes = launcherBytes([], "/not/compiled", join(dir, "native"));
    expect(bytes).toBeInstanceOf(Uint8Array);
    const installed = installLauncher(bytes as Uint8Array);
    if (typeof installed === "string") throw new Error(installed);
    expect(installed.path).toMatch(/^\/proc\/self\/fd\/\d+$/);
    const fd = installed.path.split("/").pop();
    const r = await run([installed.path, String(process.pid), "/bin/sh", "-c", `test -e /proc/self/fd/${fd} && echo leaked || echo closed`]);
    expect(r.err).toBe("");
    expect(r.out).toBe("closed\n");
  });
});

describe("death-linked launcher with the native one", () => {
  const spec: LaunchSpec = { binary: "/bin/true", args: ["-c", "x"], env: {} };
  const recorder =
    (calls: LaunchSpec[], fail = false): Launcher =>
    (s) => {
      calls.push(s);
      if (fail) throw new Error("exec refused");
      return { pid: 1, exited: new Promise(() => {}), kill() {} };
    };

  test("spawns the launcher with the agent's pid, Envoy's binary and its arguments", () => {
    const calls: LaunchSpec[] = [];
    const fallback: LaunchSpec[] = [];
    nativeLinkedLauncher("/proc/self/fd/9", 42, recorder(fallback), recorder(calls))(spec);
    expect(calls).toEqual([{ binary: "/proc/self/fd/9", args: ["42", "/bin/true", "-c", "x"], env: {} }]);
    expect(fallback).toEqual([]);
  });

  test("when the launcher cannot be spawned, Envoy starts through the fallback (the agent's copy)", () => {
    const calls: LaunchSpec[] = [];
    const fallback: LaunchSpec[] = [];
    nativeLinkedLauncher("/proc/self/fd/9", 42, recorder(fallback), recorder(calls, true))(spec);
    expect(calls).toHaveLength(1);
    expect(fallback).toEqual([spec]);
  });

  test("Envoy's binary is checked first: a missing one is the spawn error, nothing is spawned", () => {
    const calls: LaunchSpec[] = [];
    expect(() => nativeLinkedLauncher("/proc/self/fd/9", 42, recorder(calls), recorder(calls))({ ...spec, binary: "/nonexistent/envoy" })).toThrow(
      /cannot start Envoy binary \/nonexistent\/envoy/,
    );
    expect(calls).toEqual([]);
  });
});
