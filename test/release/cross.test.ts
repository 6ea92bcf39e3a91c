// Every published cross build is run (issue 21): dist/agent-linux-arm64 under qemu-user with
// Debian's arm64 glibc, dist/agent-linux-x64-musl in a minimal musl root (targets.ts). Each must
// print its version, render one of Istio's iptables conformance cases byte for byte, and start
// proxyless in local mode, serve a Listener from its file to an ADS client on its XDS socket
// (decoded with Envoy's protos), answer 200 on /healthz/ready from the status thread it should
// have (native or Worker), and exit 0 on SIGTERM.

import { afterEach, beforeAll, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { AdsClient, type ReceivedResponse } from "../e2e/ads-client.ts";
import { start } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";
import { describeRequiring } from "../support/requires.ts";
import { ARM64, buildTarget, MUSL, type Target, type TargetRoot } from "./targets.ts";
import { VECTORS } from "../conformance/vectors.ts";
import { compilerFor } from "../../native/build-responder.ts";

const REPO = resolve(import.meta.dir, "../..");
const GOLDENS = join(VECTORS, "iptables/golden");
const PKG_VERSION = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version;
/**
 * Emulated arm64 starts in ~1 s where the host takes ~50 ms: generous, bounded waits. The local
 * mode case takes 4–8 s on an idle machine and 14–22 s at load 11–14; it missed 30 s at load 15–21
 * (r01) and beside other suites at load 10: these bounds catch a hang, not slowness.
 */
const RUN_MS = 60_000;
const LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener";

function run(root: TargetRoot, args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = Bun.spawnSync(root.argv(args), {
    cwd: root.cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", CLOUD_PLATFORM: "none" },
    stdout: "pipe",
    stderr: "pipe",
    timeout: RUN_MS,
  });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

async function readyStatus(port: number): Promise<number | undefined> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/healthz/ready`, { signal: AbortSignal.timeout(2000) })).status;
  } catch {
    return undefined;
  }
}

function suite(target: Target): void {
  describeRequiring(target.requires, `${target.name} runs on its target`, () => {
    let binary = "";
    const roots: TargetRoot[] = [];
    const procs: { kill(sig?: string): void; exitCode: number | null }[] = [];
    const newRoot = () => {
      const r = target.root(binary);
      roots.push(r);
      return r;
    };
    beforeAll(() => {
      binary = buildTarget(target.name);
    }, 180_000);
    afterEach(() => {
      for (const p of procs.splice(0)) if (p.exitCode === null) p.kill("SIGKILL");
      for (const r of roots.splice(0)) r.cleanup();
    });

    test(
      "agent version -o json names the package version and the Bun runtime",
      () => {
        const r = run(newRoot(), ["version", "-o", "json"]);
        expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
        const v = JSON.parse(r.stdout).clientVersion;
        expect(v.version).toBe(PKG_VERSION);
        expect(v.runtime_version).toBe(`bun${Bun.version}`);
        expect(v.revision).toMatch(/^([0-9a-f]{12}|unknown)$/);
      },
      RUN_MS,
    );

    test(
      "agent iptables --dry-run renders Istio's ipnets golden",
      () => {
        const r = run(newRoot(), ["iptables", "--dry-run", "--proxy-uid=1337", "--proxy-gid=1337", "--istio-service-cidr=10.0.0.0/8"]);
        expect({ code: r.code }).toEqual({ code: 0 });
        expect(r.stdout.trim()).toBe(readFileSync(join(GOLDENS, "ipnets.golden"), "utf8").trim());
      },
      RUN_MS,
    );

    test(
      "proxyless local mode serves xDS from its file, is ready (200), exits 0 on SIGTERM",
      async () => {
        const root = newRoot();
        const statusPort = await freePort();
        const adminPort = await freePort();
        writeFileSync(join(root.dir, "xds.yaml"), readFileSync(join(REPO, "examples/xds.yaml")));
        const [cmd, ...args] = root.argv(["proxy", "sidecar"]);
        const agent = start(cmd!, args, {
          cwd: root.cwd,
          env: {
            POD_NAME: "greeter-client-0",
            POD_NAMESPACE: "demo",
            SERVICE_ACCOUNT: "greeter-client",
            INSTANCE_IP: "127.0.0.1",
            DISABLE_ENVOY: "true",
            CA_PROVIDER: "local",
            LOCAL_XDS_PATH: "xds.yaml",
            PROXY_CONFIG: JSON.stringify({ statusPort, proxyAdminPort: adminPort, controlPlaneAuthPolicy: "NONE" }),
          },
        });
        procs.push({
          kill: (s) => agent.proc.kill(s as NodeJS.Signals),
          get exitCode() {
            return agent.proc.exitCode;
          },
        });
        const deadline = Date.now() + RUN_MS;
        const alive = () => agent.proc.exitCode === null && Date.now() < deadline;
        const socket = join(root.dir, "etc/istio/proxy/XDS");
        while (alive() && !existsSync(socket)) await Bun.sleep(50);
        if (!existsSync(socket)) throw new Error(`${target.name}: no XDS socket at ${socket}; exit=${agent.proc.exitCode}; output:\n${agent.output()}`);
        const first = new Promise<ReceivedResponse>((resolve) => {
          const ads = new AdsClient(socket, resolve);
          procs.push({ kill: () => ads.close(), exitCode: null });
          ads.request(LISTENER);
        });
        const got = await Promise.race([first, Bun.sleep(RUN_MS).then(() => undefined)]);
        if (!got) throw new Error(`${target.name}: no xDS answer within ${RUN_MS} ms; exit=${agent.proc.exitCode}; output:\n${agent.output()}`);
        expect({ typeUrl: got.typeUrl, resources: got.resources, problem: got.problem }).toEqual({
          typeUrl: LISTENER,
          resources: 1,
          problem: undefined,
        });
        let status: number | undefined;
        while (alive()) {
          status = await readyStatus(statusPort);
          if (status === 200) break;
          await Bun.sleep(100);
        }
        if (status !== 200)
          throw new Error(`${target.name}: /healthz/ready never answered 200 (last ${status}); exit=${agent.proc.exitCode}; output:\n${agent.output()}`);
        // The status port's thread: the native responder where the build carries it (the musl
        // build embeds the x64 library; arm64 only when build.ts found aarch64-linux-gnu-gcc),
        // else the Worker, with the reason in the log.
        const workerLine = /status port: served from a Worker thread: (.*)/.exec(agent.output())?.[1];
        if (target.name === "agent-linux-x64-musl" || compilerFor("arm64")) expect({ workerLine }).toEqual({ workerLine: undefined });
        else expect(workerLine).toBe("this build carries no native status responder for linux-arm64 (statusresponder-arm64.so)");
        // The node IPs come from getifaddrs through bun:ffi (this libc: glibc under qemu, musl), not
        // the os.networkInterfaces() fallback: INSTANCE_IP, then every global address of an up
        // interface in the order `ip` (iproute2, host side) lists them.
        const global = Bun.spawnSync(["ip", "-o", "addr", "show", "up", "scope", "global"])
          .stdout.toString()
          .split("\n")
          .filter(Boolean)
          .map((l) => l.split(/\s+/)[3]!.replace(/\/\d+$/, ""));
        const ips = /Proxy role\s+ips=(\S+)/.exec(agent.output())?.[1]?.split(",");
        expect({ ips, fallback: agent.output().includes("os.networkInterfaces()") }).toEqual({ ips: ["127.0.0.1", ...global], fallback: false });
        agent.proc.kill("SIGTERM");
        const exited = await Promise.race([agent.proc.exited, Bun.sleep(RUN_MS).then(() => "timeout")]);
        expect({ exited, output: exited === 0 ? "" : agent.output() }).toEqual({ exited: 0, output: "" });
      },
      2 * RUN_MS + 5_000,
    );
  });
}

suite(ARM64);
suite(MUSL);

// README: the musl build needs libstdc++ (and libgcc) on its target. Without them it does not start.
describeRequiring(MUSL.requires, "agent-linux-x64-musl without libstdc++", () => {
  test("exits non-zero naming libstdc++.so.6", () => {
    const root = MUSL.root(buildTarget(MUSL.name));
    try {
      rmSync(join(root.dir, "lib/libstdc++.so.6"));
      const r = run(root, ["version"]);
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 127, stdout: "" });
      expect(r.stderr).toContain("Error loading shared library libstdc++.so.6");
    } finally {
      root.cleanup();
    }
  }, 180_000);
});
