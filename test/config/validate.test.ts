import { describe, expect, test } from "bun:test";
import { loadAgentConfig } from "../../src/config/load.ts";
import { inputs } from "./support.ts";

function errorOf(proxyConfig: string): string {
  try {
    loadAgentConfig(inputs({ env: { PROXY_CONFIG: proxyConfig } }));
  } catch (e) {
    return (e as Error).message;
  }
  return "no error";
}

describe("ProxyConfig validation names the field and the layer", () => {
  test.each([
    ['drainDuration: "-5s"', 'PROXY_CONFIG: drainDuration: "-5s" is negative'],
    ["drainDuration: 1500ms", 'PROXY_CONFIG: drainDuration: "1500ms": drain time only supports durations to seconds precision'],
    ["drainDuration: 0s", 'PROXY_CONFIG: drainDuration: "0s": invalid drain duration: duration must be greater than 1ms'],
    ["drainDuration: soon", 'PROXY_CONFIG: drainDuration: "soon" is not a duration (want e.g. "45s" or "1m30s")'],
    ['terminationDrainDuration: "-1s"', 'PROXY_CONFIG: terminationDrainDuration: "-1s" is negative'],
    ['configPath: ""', "PROXY_CONFIG: configPath: config path must be set"],
    ['binaryPath: ""', "PROXY_CONFIG: binaryPath: binary path must be set"],
    ['discoveryAddress: ""', "PROXY_CONFIG: discoveryAddress: discovery address must be set to the proxy discovery service"],
    ["discoveryAddress: istiod", 'PROXY_CONFIG: discoveryAddress: invalid discovery address: unable to split "istiod": missing port in address'],
    ["discoveryAddress: istiod:http", "PROXY_CONFIG: discoveryAddress: invalid discovery address: port (http) is not a number"],
    ["discoveryAddress: istiod:70000", "PROXY_CONFIG: discoveryAddress: invalid discovery address: port number 70000 must be in the range 1..65535"],
    ["discoveryAddress: bad_host!:15012", 'PROXY_CONFIG: discoveryAddress: invalid discovery address: "bad_host!" is not a valid hostname or an IP address'],
    ["statsdUdpAddress: nohost", 'PROXY_CONFIG: statsdUdpAddress: invalid statsd udp address "nohost": unable to split "nohost": missing port in address'],
    ["proxyAdminPort: 0", "PROXY_CONFIG: proxyAdminPort: port number 0 must be in the range 1..65535"],
    ["statusPort: 99999", "PROXY_CONFIG: statusPort: port number 99999 must be in the range 1..65535"],
    ["statusPort: ten", 'PROXY_CONFIG: statusPort: "ten" is not an integer'],
    ["controlPlaneAuthPolicy: SOMETIMES", 'PROXY_CONFIG: controlPlaneAuthPolicy: unrecognized control plane auth policy "SOMETIMES" (want NONE or MUTUAL_TLS)'],
    ["concurrency: -1", "PROXY_CONFIG: concurrency: -1 must not be negative"],
    ["interceptionMode: MAGIC", 'PROXY_CONFIG: interceptionMode: "MAGIC" is not one of REDIRECT, TPROXY, NONE'],
    [
      "tracing: {zipkin: {address: 'zipkin'}}",
      'PROXY_CONFIG: tracing.zipkin.address: invalid zipkin config: unable to split "zipkin": missing port in address',
    ],
    ["envoyMetricsService: {address: 'x'}", 'PROXY_CONFIG: envoyMetricsService.address: invalid address "x": unable to split "x": missing port in address'],
    [
      "privateKeyProvider: {cryptomb: {pollDelay: 0s}}",
      "PROXY_CONFIG: privateKeyProvider: invalid private key provider configuration: pollDelay must be non zero",
    ],
    ["privateKeyProvider: {other: {}}", "PROXY_CONFIG: privateKeyProvider: invalid private key provider configuration: unknown private key provider"],
    ["extraStatTags: notalist", "PROXY_CONFIG: extraStatTags: must be a list of strings"],
    ["binaryPath: 7", "PROXY_CONFIG: binaryPath: 7 is not a string"],
  ])("%s", (pc, message) => {
    expect(errorOf(pc)).toBe(message);
  });

  // Istio's ValidateZipkinCollector/ValidateDatadogCollector put 127.0.0.1 in place of the first
  // "$(HOST_IP)" before checking the address (Envoy's bootstrap gets it expanded); lightstep does not.
  test.each([
    ["tracing: {datadog: {address: '$(HOST_IP):8126'}}", "no error"],
    ["tracing: {zipkin: {address: '$(HOST_IP):9411'}}", "no error"],
    [
      "tracing: {datadog: {address: '$(HOST_IP)'}}",
      'PROXY_CONFIG: tracing.datadog.address: invalid datadog config: unable to split "127.0.0.1": missing port in address',
    ],
    [
      "tracing: {lightstep: {address: '$(HOST_IP):8080', accessToken: t}}",
      'PROXY_CONFIG: tracing.lightstep.address: invalid lightstep config: "$(HOST_IP)" is not a valid hostname or an IP address',
    ],
  ])("tracer address with $(HOST_IP): %s", (pc, message) => {
    expect(errorOf(pc)).toBe(message);
  });

  test("several problems are all reported", () => {
    expect(errorOf("proxyAdminPort: 0\nstatusPort: 0")).toBe(
      "PROXY_CONFIG: proxyAdminPort: port number 0 must be in the range 1..65535; PROXY_CONFIG: statusPort: port number 0 must be in the range 1..65535",
    );
  });

  test("a bad value in the mesh file names the mesh file", () => {
    let msg = "";
    try {
      loadAgentConfig(inputs({ files: { "./etc/istio/config/mesh": "defaultConfig:\n  proxyAdminPort: 0\n" } }));
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).toBe("mesh config ./etc/istio/config/mesh: proxyAdminPort: port number 0 must be in the range 1..65535");
  });

  test("valid values pass, numeric strings and enum numbers are normalised", () => {
    const { config } = loadAgentConfig(
      inputs({ env: { PROXY_CONFIG: '{"proxyAdminPort":"15001","controlPlaneAuthPolicy":0,"discoveryAddress":"[::1]:15012"}' } }),
    );
    expect(config.proxyConfig.proxyAdminPort).toBe(15001);
    expect(config.proxyConfig.controlPlaneAuthPolicy).toBe("NONE");
  });
});
