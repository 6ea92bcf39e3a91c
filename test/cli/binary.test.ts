// The compiled binary, run from a temp directory as a pod would run it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { expectGolden } from "../support/golden.ts";

let box: Sandbox;
beforeAll(() => {
  box = sandbox();
});
afterAll(() => box?.cleanup());

function run(args: string[], env: Record<string, string> = {}) {
  const r = Bun.spawnSync([box.bin, ...args], { cwd: box.dir, env: { PATH: process.env.PATH ?? "", CLOUD_PLATFORM: "none", ...env } });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

describe("compiled agent", () => {
  test("version --short prints the package version in Istio's shape", () => {
    const pkg = JSON.parse(readFileSync(join(import.meta.dir, "../../package.json"), "utf8"));
    const r = run(["version", "--short"]);
    expect(r.code).toBe(0);
    expect(r.out).toBe(`client version: ${pkg.version}\n`);
  });

  test("version -o json carries the git commit baked in at build time", () => {
    const r = run(["version", "-o", "json"]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    const head = Bun.spawnSync(["git", "rev-parse", "--short=12", "HEAD"], { cwd: import.meta.dir })
      .stdout.toString()
      .trim();
    expect(doc.clientVersion.revision).toBe(head);
    expect(doc.clientVersion.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  test("proxy --help matches the golden help (flags, defaults, environment variables)", () => {
    const r = run(["proxy", "--help"]);
    expect(r.code).toBe(0);
    const golden = join(import.meta.dir, "golden/proxy-help.txt");
    expectGolden(golden, r.out);
  });

  test("an invalid PROXY_CONFIG exits non-zero with one line naming field and layer", () => {
    const r = run(["proxy", "sidecar"], { PROXY_CONFIG: 'drainDuration: "-5s"' });
    expect(r.code).not.toBe(0);
    expect(r.err.trim()).toBe('Error: PROXY_CONFIG: drainDuration: "-5s" is negative');
  });

  test("unknown command", () => {
    const r = run(["frobnicate"]);
    expect(r.code).toBe(255);
    expect(r.err).toContain('unknown command "frobnicate"');
  });

  test("proxy starts, logs its effective config once, and stops cleanly on SIGTERM", async () => {
    const agent = start(box.bin, ["proxy", "sidecar", "--someLegacyFlag=1", "--log_output_level=default:info"], {
      cwd: box.dir,
      env: {
        POD_NAME: "app-0",
        POD_NAMESPACE: "demo",
        INSTANCE_IP: "10.9.8.7",
        DISABLE_ENVOY: "true",
        CA_ROOT_CA: "SYSTEM",
        PROXY_CONFIG: JSON.stringify({
          drainDuration: "7s",
          statusPort: 15999,
          discoveryAddress: "127.0.0.1:1",
          controlPlaneAuthPolicy: "NONE",
          proxyMetadata: { SECRET_TOKEN: "hunter2" },
        }),
      },
    });
    await agent.waitFor(/Agent started/);
    agent.proc.kill("SIGTERM");
    const code = await agent.proc.exited;
    const out = agent.output();
    expect(code).toBe(0);
    expect(out).toContain("unknown flag ignored (accepted for backward compatibility): --someLegacyFlag=1");
    expect(out.match(/Effective config:/g)?.length).toBe(1);
    expect(out).toContain("drainDuration: 7s");
    expect(out).toContain("nodeId=sidecar~10.9.8.7~app-0.demo~demo.svc.cluster.local");
    expect(out).not.toContain("hunter2");
    expect(out).toContain("Agent stopped");
    expect(out).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\tinfo\t/m);
  });
});
