// Every numeric or duration variable has a declared range; a value outside it is reported by name
// and the default is used (the README's promise), exactly as for a value that does not parse.
import { describe, expect, test } from "bun:test";
import { readAll } from "../../src/config/envdecl.ts";
import { PROXY_ENV } from "../../src/config/env.ts";
import { loadAgentConfig } from "../../src/config/load.ts";
import { inputs } from "./support.ts";

describe("environment ranges", () => {
  test("every int, float and duration variable declares a range", () => {
    const missing = Object.values(PROXY_ENV).filter((d) => ["int", "float", "duration"].includes(d.type) && !("range" in d && d.range));
    expect(missing.map((d) => d.name)).toEqual([]);
  });

  const cases: [string, string, number, string][] = [
    ["ISTIO_GPRC_MAXRECVMSGSIZE", "0", 4194304, "out of range: want 1 to 2147483647"],
    ["ISTIO_GPRC_MAXRECVMSGSIZE", "-1", 4194304, "out of range: want 1 to 2147483647"],
    ["ISTIO_GPRC_MAXSTREAMS", "0", 100000, "out of range: want 1 to 2147483647"],
    ["SECRET_TTL", "-5s", 86_400_000, "out of range: want at least 1s"],
    ["SECRET_TTL", "0s", 86_400_000, "out of range: want at least 1s"],
    ["SECRET_GRACE_PERIOD_RATIO", "5", 0.5, "out of range: want 0 to 1"],
    ["SECRET_GRACE_PERIOD_RATIO", "-0.1", 0.5, "out of range: want 0 to 1"],
    ["ENVOY_RESTART_BUDGET", "-1", 10, "out of range: want at least 0"],
    ["ENVOY_RESTART_BACKOFF_BASE", "-1s", 200, "out of range: want 1ms to 596h31m23.647s"],
    ["ENVOY_STATUS_PORT", "70000", 15021, "out of range: want 0 to 65535"],
    ["DNS_FORWARD_TIMEOUT", "0s", 5000, "out of range: want 1ms to 596h31m23.647s"],
    // Durations that become timers: past 2^31-1 ms a timer fires at once (a 1,000 h DNS timeout
    // would time every query out at 1 ms; a keepalive would ping istiod without pause).
    ["DNS_FORWARD_TIMEOUT", "1000h", 5000, "out of range: want 1ms to 596h31m23.647s"],
    ["GRPC_KEEPALIVE_INTERVAL", "1000h", 30_000, "out of range: want 0s to 596h31m23.647s"],
    ["WASM_PURGE_INTERVAL", "8760h", 3_600_000, "out of range: want 1s to 596h31m23.647s"],
    // Past Go's int64 nanoseconds: time.ParseDuration refuses it, so Istio uses the default too.
    ["SECRET_TTL", "9999999999h", 86_400_000, "expecting a duration like 5s or 1m30s"],
    ["WORKLOAD_RSA_KEY_SIZE", "65536", 2048, "out of range: want at most 8192"],
  ];
  for (const [name, value, def, why] of cases) {
    test(`${name}=${value} is reported by name and replaced by the default`, () => {
      const { values, problems } = readAll({ [name]: value }, PROXY_ENV);
      expect((values as Record<string, unknown>)[name]).toBe(def);
      expect(problems).toEqual([{ name, value, message: why }]);
    });
  }

  test("the bounds themselves are accepted", () => {
    const { values, problems } = readAll(
      {
        ISTIO_GPRC_MAXRECVMSGSIZE: "1",
        SECRET_GRACE_PERIOD_RATIO: "1",
        SECRET_TTL: "1s",
        ENVOY_RESTART_BUDGET: "0",
        ENVOY_STATUS_PORT: "65535",
        DNS_FORWARD_TIMEOUT: "596h31m23.647s",
      },
      PROXY_ENV,
    );
    expect(problems).toEqual([]);
    expect([
      values.ISTIO_GPRC_MAXRECVMSGSIZE,
      values.SECRET_GRACE_PERIOD_RATIO,
      values.SECRET_TTL,
      values.ENVOY_RESTART_BUDGET,
      values.ENVOY_STATUS_PORT,
      values.DNS_FORWARD_TIMEOUT,
    ]).toEqual([1, 1, 1000, 0, 65535, 2_147_483_647]);
  });

  test("the start-up warning names the variable, the value and the range", () => {
    const r = loadAgentConfig(inputs({ env: { SECRET_GRACE_PERIOD_RATIO: "5" } }));
    expect(r.warnings).toContain('Invalid environment variable value SECRET_GRACE_PERIOD_RATIO="5": out of range: want 0 to 1; using the default');
    expect(r.config.env.SECRET_GRACE_PERIOD_RATIO).toBe(0.5);
  });

  test("WORKLOAD_RSA_KEY_SIZE below 2048 is left to the key generator, which refuses it as Istio does", () => {
    const { values, problems } = readAll({ WORKLOAD_RSA_KEY_SIZE: "1024" }, PROXY_ENV);
    expect(problems).toEqual([]);
    expect(values.WORKLOAD_RSA_KEY_SIZE).toBe(1024);
  });
});
