// What each published binary needs on its target (README "Build"): the ELF reader build.ts uses
// agrees with binutils' readelf, build-needs.json states what the binaries really need, and a
// binary whose needs differ from build-needs.json fails the build.

import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { inputsHash, needsDiff, upToDate, type NeedsExpectation } from "../../build.ts";
import { readElfNeeds } from "../../scripts/elf-needs.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { describeRequiring } from "../support/requires.ts";
import { buildTarget } from "./targets.ts";

const REPO = resolve(import.meta.dir, "../..");

/** readelf's view: interpreter, NEEDED in order, highest GLIBC_ in the version needs. */
function readelf(file: string): NeedsExpectation {
  const run = (...args: string[]) => {
    const r = Bun.spawnSync(["readelf", "-W", ...args, file], {
      stdout: "pipe",
      stderr: "pipe",
      env: { LC_ALL: "C", PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    if (r.exitCode !== 0) throw new Error(`readelf ${args.join(" ")} ${file}: ${r.stderr.toString()}`);
    return r.stdout.toString();
  };
  const interpreter = /\[Requesting program interpreter: ([^\]]+)\]/.exec(run("-l"))?.[1] ?? "";
  const needed = [...run("-d").matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]!);
  const glibc = [...run("-V").matchAll(/Name: GLIBC_(\d+(?:\.\d+)*)\s/g)].map((m) => m[1]!.split(".").map(Number));
  glibc.sort((a, b) => a[0]! - b[0]! || (a[1] ?? 0) - (b[1] ?? 0) || (a[2] ?? 0) - (b[2] ?? 0));
  return { interpreter, needed, maxGlibc: glibc.length ? glibc.at(-1)!.join(".") : "" };
}

const expected = JSON.parse(readFileSync(join(REPO, "build-needs.json"), "utf8")) as Record<string, NeedsExpectation>;

describeRequiring({ tools: ["readelf"], apt: ["binutils"] }, "published binaries' needs", () => {
  const binaries: [string, () => string][] = [
    [`bun-linux-${process.arch}`, () => (requireBinary(), DIST_AGENT)],
    ["bun-linux-arm64", () => buildTarget("agent-linux-arm64")],
    ["bun-linux-x64-musl", () => buildTarget("agent-linux-x64-musl")],
  ];
  for (const [key, path] of binaries) {
    test(`${key}: the ELF reader agrees with readelf, and build-needs.json with both`, () => {
      const file = path();
      const byReadelf = readelf(file);
      const ours = readElfNeeds(file);
      expect({ interpreter: ours.interpreter, needed: ours.needed, maxGlibc: ours.maxGlibc }).toEqual(byReadelf);
      expect(byReadelf).toEqual(expected[key]!);
    }, 180_000);
  }

  test("a binary whose needs differ from the expectation fails the build, naming the difference", () => {
    buildTarget("agent-linux-arm64");
    const dir = mkdtempSync(join(tmpdir(), "agent-needs-"));
    try {
      const tampered = structuredClone(expected);
      tampered["bun-linux-arm64"]!.maxGlibc = "2.16";
      tampered["bun-linux-arm64"]!.needed = tampered["bun-linux-arm64"]!.needed.filter((n) => n !== "libdl.so.2");
      writeFileSync(join(dir, "needs.json"), JSON.stringify(tampered));
      const run = (needs: string) =>
        Bun.spawnSync([process.execPath, "build.ts", "--only", "agent-linux-arm64", "--if-changed", "--needs", needs], {
          cwd: REPO,
          stdout: "pipe",
          stderr: "pipe",
        });
      const bad = run(join(dir, "needs.json"));
      expect(bad.exitCode).toBe(1);
      expect(bad.stdout.toString()).toContain("dist/agent-linux-arm64 is up to date"); // checked without a rebuild
      const err = bad.stderr.toString();
      expect(err).toContain('highest GLIBC_ version "2.17", expected "2.16"');
      expect(err).toContain(
        "NEEDED [libc.so.6, ld-linux-aarch64.so.1, libpthread.so.0, libdl.so.2, libm.so.6], expected [libc.so.6, ld-linux-aarch64.so.1, libpthread.so.0, libm.so.6]",
      );
      // The binary was up to date, so only the check ran; the real expectation passes.
      const good = run(join(REPO, "build-needs.json"));
      expect({ code: good.exitCode, err: good.stderr.toString() }).toEqual({ code: 0, err: "" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

describe("needsDiff", () => {
  const want: NeedsExpectation = { interpreter: "/lib/ld-musl-x86_64.so.1", needed: ["libstdc++.so.6", "libc.musl-x86_64.so.1"], maxGlibc: "" };
  const elf = (over: Partial<NeedsExpectation>) => ({ machine: "x86-64", versions: {}, ...want, ...over });
  test("equal needs: no difference", () => {
    expect(needsDiff(elf({}), want)).toEqual([]);
  });
  test("each field is compared, NEEDED in order", () => {
    expect(needsDiff(elf({ interpreter: "/lib/ld-musl-aarch64.so.1", needed: ["libc.musl-x86_64.so.1", "libstdc++.so.6"], maxGlibc: "2.28" }), want)).toEqual([
      'interpreter "/lib/ld-musl-aarch64.so.1", expected "/lib/ld-musl-x86_64.so.1"',
      "NEEDED [libc.musl-x86_64.so.1, libstdc++.so.6], expected [libstdc++.so.6, libc.musl-x86_64.so.1]",
      'highest GLIBC_ version "2.28", expected ""',
    ]);
  });
});

describe("readElfNeeds on bad input", () => {
  const dir = mkdtempSync(join(tmpdir(), "agent-elf-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  test("a file that is not ELF is named", () => {
    writeFileSync(join(dir, "script"), "#!/bin/sh\necho hi\n" + " ".repeat(64));
    expect(() => readElfNeeds(join(dir, "script"))).toThrow(`${join(dir, "script")}: not an ELF file`);
  });
  test("a truncated ELF header is named, not read past the end", () => {
    writeFileSync(join(dir, "short"), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]));
    expect(() => readElfNeeds(join(dir, "short"))).toThrow("ELF header (64 bytes at 0) lies outside the file (7 bytes)");
  });
  test("a 32-bit ELF is refused by name", () => {
    const h = Buffer.alloc(64);
    h.set([0x7f, 0x45, 0x4c, 0x46, 1, 1, 1]);
    writeFileSync(join(dir, "elf32"), h);
    expect(() => readElfNeeds(join(dir, "elf32"))).toThrow("only 64-bit little-endian ELF is supported (class 1, data 1)");
  });
});

describe("build.ts --if-changed: inputs digest and staleness", () => {
  const root = mkdtempSync(join(tmpdir(), "agent-inputs-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const put = (rel: string, text: string) => {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  };
  put("package.json", "{}");
  put("src/main.ts", "a");
  put("proto/x.proto", "p");
  put("examples/ignored.ts", "e");
  const base = inputsHash(root, "bun-linux-arm64", true, "1.4.5");

  test("same inputs, same digest; a file outside the inputs does not count", () => {
    put("examples/ignored.ts", "changed");
    expect(inputsHash(root, "bun-linux-arm64", true, "1.4.5")).toBe(base);
  });
  test("a changed, added or renamed source, the target, bytecode or Bun version each change it", () => {
    const seen = new Set([base]);
    const record = () => {
      const h = inputsHash(root, "bun-linux-arm64", true, "1.4.5");
      expect(seen.has(h)).toBe(false);
      seen.add(h);
    };
    put("src/main.ts", "b");
    record();
    put("src/lib/new.ts", "n");
    record();
    rmSync(join(root, "src/lib/new.ts"));
    put("src/lib/renamed.ts", "n");
    record();
    put("proto/x.proto", "q");
    record();
    put("package.json", '{"version":"2"}');
    record();
    const now = inputsHash(root, "bun-linux-arm64", true, "1.4.5");
    for (const h of [
      inputsHash(root, "bun-linux-x64-musl", true, "1.4.5"),
      inputsHash(root, "bun-linux-arm64", false, "1.4.5"),
      inputsHash(root, "bun-linux-arm64", true, "1.4.6"),
    ]) {
      expect(h).not.toBe(now);
    }
  });
  test("up to date only when the binary exists and its stamp holds exactly the digest", () => {
    const bin = join(root, "dist/agent-x");
    const stamp = join(root, "dist/.agent-x.inputs");
    expect(upToDate(bin, stamp, base)).toBe(false);
    put("dist/.agent-x.inputs", base);
    expect(upToDate(bin, stamp, base)).toBe(false); // no binary
    put("dist/agent-x", "elf");
    expect(upToDate(bin, stamp, base)).toBe(true);
    expect(
      upToDate(
        bin,
        stamp,
        base.replace(/.$/, (c) => (c === "0" ? "1" : "0")),
      ),
    ).toBe(false);
    put("dist/.agent-x.inputs", "");
    expect(upToDate(bin, stamp, base)).toBe(false);
  });
});
