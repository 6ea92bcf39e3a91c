import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentConfig } from "../../src/config/agentconfig.ts";
import { readAll } from "../../src/config/envdecl.ts";
import { PROXY_ENV } from "../../src/config/env.ts";
import { defaultProxyConfig, type ProxyConfig } from "../../src/config/proxyconfig.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { createEnvoySupervisor, envoyArgs, envoyOptionsFromConfig } from "../../src/envoy/index.ts";
import { HttpEnvoyAdmin } from "../../src/envoy/admin.ts";
import { DEFAULT_FLAGS } from "../config/support.ts";

const root = mkdtempSync(join(tmpdir(), "envoy-factory-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function config(rawEnv: Record<string, string>, over: Partial<AgentConfig> = {}, pc: Partial<ProxyConfig> = {}): AgentConfig {
  return {
    proxyType: "sidecar",
    proxyConfig: { ...defaultProxyConfig(), ...pc },
    proxyConfigSources: {},
    env: readAll(rawEnv, PROXY_ENV).values,
    rawEnv,
    flags: { ...DEFAULT_FLAGS, meshConfig: "", proxyComponentLogLevel: "misc:error" },
    node: {
      type: "sidecar",
      ips: ["10.1.2.3"],
      ipMode: "ipv4",
      id: "p.ns",
      domain: "ns.svc.cluster.local",
      nodeId: "sidecar~10.1.2.3~p.ns~ns.svc.cluster.local",
      podName: "p",
      podNamespace: "ns",
      serviceAccount: "sa",
    },
    labels: {},
    annotations: {},
    root,
    uid: 1337,
    version: "test",
    ...over,
  };
}

const deps = () => ({ log: memoryLogger().log, readiness: new Readiness(), bootstrapPath: "./etc/istio/proxy/envoy-rev.json", reapOrphans: false });

test("defaults: Istio's argument list, sidecar drain plan, restart policy from env, rendered bootstrap cleaned up", () => {
  const o = envoyOptionsFromConfig(config({ PATH: "/bin", ISTIO_CPU_LIMIT: "2" }, {}, { concurrency: 2 }), deps());
  expect(o.binaryPath).toBe("/usr/local/bin/envoy");
  expect(envoyArgs(o.args)).toEqual([
    "-c",
    "./etc/istio/proxy/envoy-rev.json",
    "--drain-time-s",
    "45",
    "--drain-strategy",
    "immediate",
    "--local-address-ip-version",
    "v4",
    "--file-flush-interval-msec",
    "1000",
    "--disable-hot-restart",
    "--allow-unknown-static-fields",
    "-l",
    "warning",
    "--component-log-level",
    "misc:error",
    "--skip-deprecated-logs",
    "--concurrency",
    "2",
  ]);
  expect(o.drainPlan).toMatchObject({ mode: "wait", inboundOnly: true, terminationDrainMs: 5000, minimumDrainMs: 5000 });
  expect(o.drainPlan.terminationGraceMs).toBeUndefined();
  expect(o.restart).toEqual({ mode: "never", baseMs: 200, maxMs: 30_000, budget: 10, windowMs: 600_000 });
  expect(o.runAs).toBeUndefined();
  expect(o.hotRestart).toBeUndefined();
  expect(o.cleanupFiles).toEqual([join(root, "etc/istio/proxy/envoy-rev.json")]);
  expect((o.admin as HttpEnvoyAdmin).base).toBe("http://127.0.0.1:15000");
  expect(o.env).toEqual({ PATH: "/bin", ISTIO_CPU_LIMIT: "2" });
  expect(o.knownListeners.has("listener.0.0.0.0_15021.downstream_cx_active")).toBe(true);
  expect(o.reaper).toBeUndefined();
});

test("router, IPv6, root with DNS on :53, FIPS, zero-connections, hot restart, override file", () => {
  const override = join(root, "custom_bootstrap.yaml");
  writeFileSync(override, 'tracing: {address: "$(HOST_IP):9411"}\n');
  const custom = join(root, "custom-envoy.json");
  const env = {
    DNS_PROXY_ADDR: "localhost:53",
    COMPLIANCE_POLICY: "fips-140-2",
    EXIT_ON_ZERO_ACTIVE_CONNECTIONS: "true",
    MINIMUM_DRAIN_DURATION: "7s",
    ENVOY_RESTART_POLICY: "on-failure",
    ENVOY_HOT_RESTART: "true",
    ISTIO_BOOTSTRAP_OVERRIDE: override,
    HOST_IP: "fd00::9",
    ISTIO_ENVOY_ENABLE_CORE_DUMP: "true",
  };
  const cfg = config(
    env,
    {
      proxyType: "router",
      uid: 0,
      node: { ...config({}).node, ips: ["fd00::1"], ipMode: "ipv6" },
      flags: { ...config({}).flags, proxyLogLevel: "info,upstream:debug", concurrency: 4 },
    },
    {
      customConfigFile: custom,
      drainDuration: "20s",
      terminationDrainDuration: "9s",
      fileFlushInterval: "2.5s",
      fileFlushMinSizeKb: 64,
      proxyAdminPort: 15555,
    },
  );
  const o = envoyOptionsFromConfig(cfg, { ...deps(), bootstrapPath: custom });
  expect(o.runAs).toEqual({ uid: 1337, gid: 1337 });
  expect(o.env.GRPC_SSL_CIPHER_SUITES).toContain("ECDHE-ECDSA-AES128-GCM-SHA256");
  expect(o.drainPlan).toMatchObject({ mode: "zero-connections", inboundOnly: false, minimumDrainMs: 7000, terminationDrainMs: 9000 });
  expect(o.restart.mode).toBe("on-failure");
  expect(o.hotRestart).toEqual({ watchFiles: [custom, override], parentShutdownS: 35 });
  expect(o.cleanupFiles).toEqual([]); // never delete the user's custom config
  expect((o.admin as HttpEnvoyAdmin).base).toBe("http://[::1]:15555");
  expect(envoyArgs(o.args)).toEqual([
    "-c",
    custom,
    "--drain-time-s",
    "20",
    "--drain-strategy",
    "immediate",
    "--local-address-ip-version",
    "v6",
    "--file-flush-interval-msec",
    "2500",
    "--disable-hot-restart",
    "--allow-unknown-static-fields",
    "--file-flush-min-size-kb",
    "64",
    "-l",
    "info",
    "--component-log-level",
    "upstream:debug",
    "--skip-deprecated-logs",
    "--enable-core-dump",
    "--config-yaml",
    `{"tracing":{"address":"[fd00::9]:9411"}}`,
    "--concurrency",
    "4",
  ]);
});

test("bad inputs are warned about by name and defaults used", () => {
  const m = memoryLogger();
  const o = envoyOptionsFromConfig(
    config({ ENVOY_RESTART_POLICY: "sometimes", ISTIO_BOOTSTRAP_OVERRIDE: join(root, "missing.yaml") }, {}, { drainDuration: "soon" }),
    {
      ...deps(),
      log: m.log,
    },
  );
  expect(o.args.drainDurationMs).toBe(45_000);
  expect(o.restart.mode).toBe("never");
  expect(o.args.configYaml).toBeUndefined();
  const text = m.lines.join("\n");
  expect(text).toContain(`ProxyConfig.drainDuration: invalid duration "soon"`);
  expect(text).toContain(`ENVOY_RESTART_POLICY="sometimes"`);
  expect(text).toContain("missing.yaml");
});

test("createEnvoySupervisor returns an idle Component with LifecycleControl", () => {
  const sup = createEnvoySupervisor(config({}), deps());
  expect(sup.name).toBe("envoy");
  expect(sup.state).toBe("idle");
  expect(typeof sup.quit).toBe("function");
  expect(typeof sup.drain).toBe("function");
  expect(sup.exited).toBeInstanceOf(Promise);
});

test("hot-restart epochs trigger on mounted certificate files and the bootstrap, not only a custom config file", () => {
  const o = envoyOptionsFromConfig(config({ ENVOY_HOT_RESTART: "true" }), {
    ...deps(),
    certificateFiles: ["./etc/certs/cert-chain.pem", "./etc/certs/key.pem", "./etc/certs/root-cert.pem"],
  });
  expect(o.hotRestart?.watchFiles).toEqual([
    join(root, "etc/istio/proxy/envoy-rev.json"),
    join(root, "etc/certs/cert-chain.pem"),
    join(root, "etc/certs/key.pem"),
    join(root, "etc/certs/root-cert.pem"),
  ]);
});

test("TERMINATION_GRACE_PERIOD_SECONDS reaches the drain plan, and the supervisor warns at start when the plan cannot fit", async () => {
  const cfg = config({ PATH: "/bin", TERMINATION_GRACE_PERIOD_SECONDS: "10" });
  expect(envoyOptionsFromConfig(cfg, deps()).drainPlan.terminationGraceMs).toBe(10_000);
  const { log, lines } = memoryLogger();
  const sup = createEnvoySupervisor(cfg, { ...deps(), log, bootstrapPath: "/nonexistent/envoy-rev.json" });
  await sup.start(new AbortController().signal).catch(() => undefined);
  const plan = lines.findIndex((l) => l.includes("drain plan on SIGTERM"));
  expect(plan).toBeGreaterThanOrEqual(0);
  expect(lines[plan + 1]).toContain(
    "warn\tenvoy\tdrain plan needs up to 15s (terminationDrainDuration 5s + SIGKILL grace 5s + component stop 5s), more than TERMINATION_GRACE_PERIOD_SECONDS 10s",
  );
});
