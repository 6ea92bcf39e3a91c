import { describe, expect, test } from "bun:test";
import {
  allIPv6,
  envoyArgs,
  envoyEnv,
  envoyRunsAsProxyUser,
  FIPS_GRPC_SSL_CIPHER_SUITES,
  parentShutdownSeconds,
  splitComponentLog,
  type EnvoyArgsOptions,
} from "../../src/envoy/args.ts";
import { bootstrapOverrideToJson } from "../../src/bootstrap/override.ts";

// Istio's pkg/envoy/proxy_test.go TestEnvoyArgs: DefaultProxyConfig (drainDuration 45s), log
// level "trace", component level "misc:error", IPv4 node IPs, concurrency 8, bootstrap override
// testdata/bootstrap.json = {"key": "value"}.
const istioBase: EnvoyArgsOptions = {
  bootstrapPath: "test.json",
  drainDurationMs: 45_000,
  nodeIps: ["10.75.2.9", "192.168.11.18"],
  proxyLogLevel: "trace",
  proxyComponentLogLevel: "misc:error",
  skipDeprecatedLogs: false,
  enableCoreDump: false,
  configYaml: bootstrapOverrideToJson(`{"key": "value"}`, ""),
  concurrency: 8,
};

describe("envoyArgs matches Istio's TestEnvoyArgs", () => {
  test("default", () => {
    expect(envoyArgs(istioBase)).toEqual([
      "-c",
      "test.json",
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
      "trace",
      "--component-log-level",
      "misc:error",
      "--config-yaml",
      `{"key":"value"}`,
      "--concurrency",
      "8",
    ]);
  });

  test("deprecated-logs", () => {
    expect(envoyArgs({ ...istioBase, skipDeprecatedLogs: true })).toEqual([
      "-c",
      "test.json",
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
      "trace",
      "--component-log-level",
      "misc:error",
      "--skip-deprecated-logs",
      "--config-yaml",
      `{"key":"value"}`,
      "--concurrency",
      "8",
    ]);
  });

  test("file-flush", () => {
    expect(envoyArgs({ ...istioBase, fileFlushMinSizeKb: 128, fileFlushIntervalMs: 10_000 })).toEqual([
      "-c",
      "test.json",
      "--drain-time-s",
      "45",
      "--drain-strategy",
      "immediate",
      "--local-address-ip-version",
      "v4",
      "--file-flush-interval-msec",
      "10000",
      "--disable-hot-restart",
      "--allow-unknown-static-fields",
      "--file-flush-min-size-kb",
      "128",
      "-l",
      "trace",
      "--component-log-level",
      "misc:error",
      "--config-yaml",
      `{"key":"value"}`,
      "--concurrency",
      "8",
    ]);
  });
});

describe("envoyArgs, other configurations", () => {
  const minimal: EnvoyArgsOptions = {
    bootstrapPath: "./etc/istio/proxy/envoy-rev.json",
    drainDurationMs: 45_000,
    nodeIps: ["fd00::1", "fe80::2"],
    proxyLogLevel: "warning",
    proxyComponentLogLevel: "misc:error",
    skipDeprecatedLogs: true,
    enableCoreDump: true,
    concurrency: 0,
  };

  test("IPv6-only pod, injector defaults, core dump, no override, concurrency 0 omitted", () => {
    expect(envoyArgs(minimal)).toEqual([
      "-c",
      "./etc/istio/proxy/envoy-rev.json",
      "--drain-time-s",
      "45",
      "--drain-strategy",
      "immediate",
      "--local-address-ip-version",
      "v6",
      "--file-flush-interval-msec",
      "1000",
      "--disable-hot-restart",
      "--allow-unknown-static-fields",
      "-l",
      "warning",
      "--component-log-level",
      "misc:error",
      "--skip-deprecated-logs",
      "--enable-core-dump",
    ]);
  });

  test("component levels in --proxyLogLevel win over --proxyComponentLogLevel; drain seconds truncate", () => {
    const args = envoyArgs({
      ...minimal,
      nodeIps: ["fd00::1", "10.0.0.1"],
      drainDurationMs: 1500,
      proxyLogLevel: "info,misc:error,upstream:debug",
      enableCoreDump: false,
      skipDeprecatedLogs: false,
    });
    expect(args.slice(2)).toEqual([
      "--drain-time-s",
      "1",
      "--drain-strategy",
      "immediate",
      "--local-address-ip-version",
      "v4",
      "--file-flush-interval-msec",
      "1000",
      "--disable-hot-restart",
      "--allow-unknown-static-fields",
      "-l",
      "info",
      "--component-log-level",
      "misc:error,upstream:debug",
    ]);
  });

  test("empty log level passes neither -l nor the component flag when both are empty", () => {
    const args = envoyArgs({ ...minimal, proxyLogLevel: "", proxyComponentLogLevel: "", skipDeprecatedLogs: false, enableCoreDump: false });
    expect(args).not.toContain("-l");
    expect(args).not.toContain("--component-log-level");
    expect(args.at(-1)).toBe("--allow-unknown-static-fields");
  });

  test("hot restart replaces --disable-hot-restart with the epoch flags", () => {
    const args = envoyArgs({ ...istioBase, hotRestart: { epoch: 3, parentShutdownS: 60 } });
    expect(args).not.toContain("--disable-hot-restart");
    const i = args.indexOf("--restart-epoch");
    expect(args.slice(i, i + 4)).toEqual(["--restart-epoch", "3", "--parent-shutdown-time-s", "60"]);
    expect(args.indexOf("--allow-unknown-static-fields")).toBe(i + 4);
    expect(parentShutdownSeconds(45_000)).toBe(60);
  });
});

test("splitComponentLog follows Istio's TestSplitComponentLog", () => {
  const cases: [string, string, string[]][] = [
    ["info", "info", []],
    ["info,warn", "warn", []],
    ["info,misc:warn", "info", ["misc:warn"]],
    ["misc:warn,info", "info", ["misc:warn"]],
    ["misc:warn,info,upstream:debug", "info", ["misc:warn", "upstream:debug"]],
  ];
  for (const [input, level, components] of cases) {
    const got = splitComponentLog(input);
    expect({ input, level: got.level, components: got.components }).toEqual({ input, level, components });
  }
  expect(splitComponentLog("info,a:b:c").dropped).toEqual(["a:b:c"]);
});

test("allIPv6 skips unparseable addresses like Istio", () => {
  expect(allIPv6(["::1", "fd00::2"])).toBe(true);
  expect(allIPv6(["::1", "10.0.0.1"])).toBe(false);
  expect(allIPv6(["::1", "bogus"])).toBe(true);
  expect(allIPv6(["::ffff:10.0.0.1"])).toBe(true); // Go's netip Is4 is false for mapped addresses
});

describe("bootstrapOverrideToJson (Istio's TestReadToJSON)", () => {
  const yaml = `---\n# Sample custom bootstrap in YAML\nkey: value\nip: "[$(HOST_IP)]:8126"\nip2: "$(HOST_IP):8126"\n`;
  test("IPv4 host", () => {
    expect(bootstrapOverrideToJson(yaml, "169.254.169.254")).toBe(`{"ip":"[169.254.169.254]:8126","ip2":"169.254.169.254:8126","key":"value"}`);
  });
  test("IPv6 host is bracketed once", () => {
    expect(bootstrapOverrideToJson(yaml, "dead::beef")).toBe(`{"ip":"[dead::beef]:8126","ip2":"[dead::beef]:8126","key":"value"}`);
  });
  test("nested keys sorted, HTML characters escaped as Go does", () => {
    expect(bootstrapOverrideToJson(`b: {z: 1, a: "<&>"}\na: [2, 1]`, "")).toBe(`{"a":[2,1],"b":{"a":"\\u003c\\u0026\\u003e","z":1}}`);
  });
  test("invalid YAML names the file", () => {
    expect(() => bootstrapOverrideToJson("a: [1,\n", "", "/etc/istio/custom-bootstrap/custom_bootstrap.json")).toThrow(/custom_bootstrap\.json/);
  });
});

test("envoyEnv passes the environment through and adds FIPS ciphers only under FIPS policies", () => {
  const base = { PATH: "/bin", UNSET: undefined, POD_NAME: "p" };
  expect(envoyEnv(base, "")).toEqual({ PATH: "/bin", POD_NAME: "p" });
  expect(envoyEnv(base, "fips-140-2").GRPC_SSL_CIPHER_SUITES).toBe(FIPS_GRPC_SSL_CIPHER_SUITES);
  expect(envoyEnv(base, "fips-140-3").GRPC_SSL_CIPHER_SUITES).toBe(FIPS_GRPC_SSL_CIPHER_SUITES);
  expect(envoyEnv(base, "pqc").GRPC_SSL_CIPHER_SUITES).toBeUndefined();
});

test("Envoy runs as 1337 only when the agent is root and DNS binds :53", () => {
  expect(envoyRunsAsProxyUser(0, "localhost:53")).toBe(true);
  expect(envoyRunsAsProxyUser(0, "localhost:15053")).toBe(false);
  expect(envoyRunsAsProxyUser(1337, "localhost:53")).toBe(false);
});
