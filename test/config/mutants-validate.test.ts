// validateProxyConfig and addressProblem called directly: every field list entry, the
// normalisation of integers and durations, the bounds, and Istio's address rules
// (pkg/config/validation/agent ValidateProxyAddress at 86c9f01: net.SplitHostPort, ValidatePort,
// ValidateFQDN, else netip.ParseAddr). Found by mutation testing (npm run mutate -- config-validate).

import { describe, expect, test } from "bun:test";
import { defaultProxyConfig, type ProxyConfig } from "../../src/config/proxyconfig.ts";
import { addressProblem, validateProxyConfig } from "../../src/config/validate.ts";

const validate = (over: Record<string, unknown>, sources: Record<string, string> = {}) =>
  validateProxyConfig({ ...defaultProxyConfig(), ...over } as ProxyConfig, sources);
const errorsOf = (over: Record<string, unknown>) => validate(over).errors;
const problem = (addr: string): string | undefined => {
  let out: string | undefined;
  addressProblem(addr, (m) => (out = m));
  return out;
};

describe("addressProblem: Istio's ValidateProxyAddress", () => {
  test.each([
    ["istiod.istio-system.svc:15012"],
    ["Istiod.Istio-System.svc:15012"], // labels may be upper case (Istio's dns1123LabelFmt has A-Z)
    ["istiod.istio-system.svc.:15012"], // a trailing dot: the last, empty label is allowed
    ["localhost:1"],
    ["localhost:65535"],
    ["10.0.0.1:80"],
    ["[::1]:15012"],
    ["[10.0.0.1]:80"],
    ["[2001:db8::1]:443"],
    [`${"a".repeat(63)}.svc:80`],
    [`${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(63)}:80`], // 255 characters
    ["1.2.3.:80"], // the top-level "domain" is the empty label after the dot, not "3"
    ["a-b.c:80"],
    ["a.9223372036854775808:80"], // beyond int64: Atoi fails, so the label counts as a name
  ])("%s is valid", (addr) => {
    expect(problem(addr)).toBeUndefined();
  });

  test.each([
    ["istiod", 'unable to split "istiod": missing port in address'],
    ["istiod:", "port () is not a number"],
    ["istiod:0", "port number 0 must be in the range 1..65535"],
    ["istiod:65536", "port number 65536 must be in the range 1..65535"],
    ["istiod:-1", "port (-1) is not a number"],
    [":15012", '"" is not a valid hostname or an IP address'],
    ["-istiod:15012", '"-istiod" is not a valid hostname or an IP address'],
    ["istiod-:15012", '"istiod-" is not a valid hostname or an IP address'],
    ["a..b:15012", '"a..b" is not a valid hostname or an IP address'],
    ["under_score:80", '"under_score" is not a valid hostname or an IP address'],
    [`${"a".repeat(64)}.svc:80`, `"${"a".repeat(64)}.svc" is not a valid hostname or an IP address`],
    [
      `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(64)}:80`,
      `"${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(64)}" is not a valid hostname or an IP address`,
    ],
    // An all-numeric top-level domain is no host name; then it must parse as an IP address.
    ["1.2.3:80", '"1.2.3" is not a valid hostname or an IP address'],
    ["999.1.1.1:80", '"999.1.1.1" is not a valid hostname or an IP address'],
    ["010.0.0.1:80", '"010.0.0.1" is not a valid hostname or an IP address'],
    ["[::zz]:80", '"::zz" is not a valid hostname or an IP address'],
    ["::1:80", 'unable to split "::1:80": missing port in address'],
    ["istiod:80a", "port (80a) is not a number"],
    ["host.12:80", '"host.12" is not a valid hostname or an IP address'],
    // 256 characters in labels of at most 63.
    [
      `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(62)}.e:80`,
      `"${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(62)}.e" is not a valid hostname or an IP address`,
    ],
    // Go's strconv.Atoi takes the top-level label for a number only within int64.
    ["a.9223372036854775807:80", '"a.9223372036854775807" is not a valid hostname or an IP address'],
  ])("%s: %s", (addr, msg) => {
    expect(problem(addr)).toBe(msg);
  });
});

describe("validateProxyConfig", () => {
  test("Istio's defaults are valid and come back unchanged", () => {
    const r = validate({});
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.config).toEqual(defaultProxyConfig());
  });

  test.each([
    "configPath",
    "binaryPath",
    "serviceCluster",
    "discoveryAddress",
    "zipkinAddress",
    "statsdUdpAddress",
    "customConfigFile",
    "proxyBootstrapTemplatePath",
    "meshId",
    "caCertificatePem",
    "sidecarStatsTemplate",
  ])("%s must be a string", (field) => {
    expect(errorsOf({ [field]: 7 })[0]).toBe(`default: ${field}: 7 is not a string`);
    expect(errorsOf({ [field]: null }).filter((e) => e.includes("is not a string"))).toEqual([]);
  });

  test.each(["proxyAdminPort", "statusPort", "statNameLength", "fileFlushMinSizeKb"])("%s: integers, numeric strings and wrappers", (field) => {
    expect(validate({ [field]: "1234" }).config[field]).toBe(1234);
    expect(validate({ [field]: " 1234 " }).config[field]).toBe(1234);
    expect(validate({ [field]: { value: "99" } }).config[field]).toBe(99);
    expect(validate({ [field]: { value: 98 } }).config[field]).toBe(98);
    expect(errorsOf({ [field]: 1.5 })).toEqual([`default: ${field}: 1.5 is not an integer`]);
    expect(errorsOf({ [field]: "12a" })).toEqual([`default: ${field}: "12a" is not an integer`]);
    expect(errorsOf({ [field]: true })).toEqual([`default: ${field}: true is not an integer`]);
    expect(errorsOf({ [field]: {} })).toEqual([`default: ${field}: {} is not an integer`]);
    expect(validate({ [field]: null }).config[field]).toBeNull();
    expect(errorsOf({ [field]: null })).toEqual([]);
    expect(errorsOf({ [field]: "a12" })).toEqual([`default: ${field}: "a12" is not an integer`]);
    expect(errorsOf({ [field]: "" })).toEqual([`default: ${field}: "" is not an integer`]);
  });

  test("statNameLength and fileFlushMinSizeKb take any integer; the two ports must be 1..65535", () => {
    expect(errorsOf({ statNameLength: "-3", fileFlushMinSizeKb: 0 })).toEqual([]);
    expect(validate({ statNameLength: "-3" }).config.statNameLength).toBe(-3);
    expect(errorsOf({ proxyAdminPort: 1, statusPort: 65535 })).toEqual([]);
    expect(errorsOf({ proxyAdminPort: "65536" })).toEqual(["default: proxyAdminPort: port number 65536 must be in the range 1..65535"]);
    expect(errorsOf({ statusPort: "0" })).toEqual(["default: statusPort: port number 0 must be in the range 1..65535"]);
  });

  test("concurrency: integer >= 0, normalised; null and unset are fine", () => {
    expect(validate({ concurrency: "2" }).config.concurrency).toBe(2);
    expect(validate({ concurrency: 0 }).config.concurrency).toBe(0);
    expect(errorsOf({ concurrency: 0 })).toEqual([]);
    expect(errorsOf({ concurrency: null })).toEqual([]);
    expect(errorsOf({ concurrency: "two" })).toEqual(['default: concurrency: "two" is not an integer']);
    expect(errorsOf({ concurrency: -1 })).toEqual(["default: concurrency: -1 must not be negative"]);
  });

  test.each(["drainDuration", "terminationDrainDuration", "fileFlushInterval", "parentShutdownDuration", "discoveryRefreshDelay"])(
    "%s: Go or protobuf durations and bare seconds, normalised to protobuf JSON",
    (field) => {
      expect(validate({ [field]: "1m30s" }).config[field]).toBe("90s");
      expect(validate({ [field]: 45 }).config[field]).toBe("45s");
      expect(validate({ [field]: "2s" }).config[field]).toBe("2s");
      expect(validate({ [field]: null }).config[field]).toBeNull();
      expect(errorsOf({ [field]: null })).toEqual([]);
      expect(errorsOf({ [field]: true })).toEqual([`default: ${field}: true is not a duration (want e.g. "45s" or "1m30s")`]);
      expect(errorsOf({ [field]: "-1s" })).toEqual([`default: ${field}: "-1s" is negative`]);
    },
  );

  test("durations: sub-second normalised with milliseconds; the protobuf range's bound is kept", () => {
    expect(validate({ terminationDrainDuration: "500ms" }).config.terminationDrainDuration).toBe("0.500s");
    expect(validate({ terminationDrainDuration: "0s" }).config.terminationDrainDuration).toBe("0s");
    expect(validate({ terminationDrainDuration: 315_576_000_000 }).config.terminationDrainDuration).toBe("315576000000s");
    expect(errorsOf({ terminationDrainDuration: 315_576_000_001 })).toEqual([
      "default: terminationDrainDuration: 315576000001 is out of range (at most 315576000000s)",
    ]);
  });

  test("drainDuration: at least 1ms, whole seconds; the message quotes the value as written", () => {
    expect(errorsOf({ drainDuration: "1ms" })).toEqual(['default: drainDuration: "1ms": drain time only supports durations to seconds precision']);
    expect(errorsOf({ drainDuration: "0.5ms" })).toEqual(['default: drainDuration: "0.5ms": invalid drain duration: duration must be greater than 1ms']);
    expect(errorsOf({ drainDuration: 1 })).toEqual([]);
    expect(errorsOf({ drainDuration: 0 })).toEqual(["default: drainDuration: 0: invalid drain duration: duration must be greater than 1ms"]);
    // A value already refused is not judged again as a drain time.
    expect(errorsOf({ drainDuration: 315_576_000_001.5 })).toEqual(["default: drainDuration: 315576000001.5 is out of range (at most 315576000000s)"]);
  });

  test("serviceCluster: one of serviceCluster or tracingServiceName", () => {
    expect(errorsOf({ serviceCluster: undefined })).toEqual(["default: serviceCluster: oneof service cluster or tracing service name must be specified"]);
    expect(errorsOf({ serviceCluster: undefined, tracingServiceName: "APP_LABEL_AND_NAMESPACE" })).toEqual([]);
    expect(errorsOf({ serviceCluster: "", tracingServiceName: "APP_LABEL_AND_NAMESPACE" })).toEqual([
      "default: serviceCluster: service cluster must be specified",
    ]);
  });

  test("each problem names the layer that set the field (the first segment of a dotted field)", () => {
    const r = validate(
      { proxyAdminPort: 0, envoyAccessLogService: { address: "als" }, tracing: { lightstep: { address: "x" } } },
      { proxyAdminPort: "PROXY_CONFIG", envoyAccessLogService: "mesh config /etc/istio/config/mesh" },
    );
    expect(r.errors).toEqual([
      'mesh config /etc/istio/config/mesh: envoyAccessLogService.address: invalid address "als": unable to split "als": missing port in address',
      'default: tracing.lightstep.address: invalid lightstep config: unable to split "x": missing port in address',
      "PROXY_CONFIG: proxyAdminPort: port number 0 must be in the range 1..65535",
    ]);
  });

  test("statsd, metrics and access-log service addresses are checked only when set", () => {
    expect(errorsOf({ statsdUdpAddress: "", envoyMetricsService: { address: "" }, envoyAccessLogService: {} })).toEqual([]);
    expect(errorsOf({ statsdUdpAddress: "statsd:8125", envoyMetricsService: { address: "ms:9000" } })).toEqual([]);
    expect(errorsOf({ statsdUdpAddress: "statsd:0" })).toEqual([
      'default: statsdUdpAddress: invalid statsd udp address "statsd:0": port number 0 must be in the range 1..65535',
    ]);
    expect(errorsOf({ envoyMetricsService: { address: 7 } })).toEqual([]);
  });

  test("tracers: each one's address; $(HOST_IP) stands for 127.0.0.1 for zipkin and datadog only", () => {
    expect(errorsOf({ tracing: { zipkin: { address: "zipkin:9411" }, datadog: { address: "$(HOST_IP):8126" } } })).toEqual([]);
    expect(errorsOf({ tracing: { datadog: { address: "dd" } } })).toEqual([
      'default: tracing.datadog.address: invalid datadog config: unable to split "dd": missing port in address',
    ]);
    expect(errorsOf({ tracing: { zipkin: { address: "$(HOST_IP)" } } })).toEqual([
      'default: tracing.zipkin.address: invalid zipkin config: unable to split "127.0.0.1": missing port in address',
    ]);
    expect(errorsOf({ tracing: { zipkin: {} } })).toEqual([]);
    expect(errorsOf({ tracing: { zipkin: { address: 7 } } })).toEqual([]); // only a text address is checked as one
  });

  test("controlPlaneAuthPolicy: names and enum numbers", () => {
    expect(validate({ controlPlaneAuthPolicy: 1 }).config.controlPlaneAuthPolicy).toBe("MUTUAL_TLS");
    expect(validate({ controlPlaneAuthPolicy: "1" }).config.controlPlaneAuthPolicy).toBe("MUTUAL_TLS");
    expect(validate({ controlPlaneAuthPolicy: "0" }).config.controlPlaneAuthPolicy).toBe("NONE");
    expect(validate({ controlPlaneAuthPolicy: "NONE" }).config.controlPlaneAuthPolicy).toBe("NONE");
    expect(errorsOf({ controlPlaneAuthPolicy: 2 })).toEqual([
      "default: controlPlaneAuthPolicy: unrecognized control plane auth policy 2 (want NONE or MUTUAL_TLS)",
    ]);
    expect(errorsOf({ controlPlaneAuthPolicy: undefined })).toEqual([]);
  });

  test("interceptionMode and extraStatTags", () => {
    for (const m of ["REDIRECT", "TPROXY", "NONE"]) expect(errorsOf({ interceptionMode: m })).toEqual([]);
    expect(errorsOf({ interceptionMode: "redirect" })).toEqual(['default: interceptionMode: "redirect" is not one of REDIRECT, TPROXY, NONE']);
    expect(errorsOf({ extraStatTags: ["a", "b"] })).toEqual([]);
    expect(errorsOf({ extraStatTags: [] })).toEqual([]);
    expect(errorsOf({ extraStatTags: ["a", 1] })).toEqual(["default: extraStatTags: must be a list of strings"]);
  });

  test("privateKeyProvider: cryptomb or qat, with a non-zero pollDelay", () => {
    const pkp = (p: unknown) => errorsOf({ privateKeyProvider: p });
    expect(pkp({ cryptomb: { pollDelay: "10ms" } })).toEqual([]);
    expect(pkp({ qat: { pollDelay: "0.010s" } })).toEqual([]);
    const msg = (m: string) => [`default: privateKeyProvider: invalid private key provider configuration: ${m}`];
    expect(pkp({ qat: {} })).toEqual(msg("pollDelay is required"));
    expect(pkp({ qat: { pollDelay: "0s" } })).toEqual(msg("pollDelay must be non zero"));
    expect(pkp({ cryptomb: { pollDelay: "soon" } })).toEqual(msg('pollDelay "soon" is not a duration'));
    expect(pkp({ cryptomb: { pollDelay: 315_576_000_001 } })).toEqual(msg("pollDelay 315576000001 is not a duration"));
    expect(pkp({ cryptomb: { pollDelay: -315_576_000_000 } })).toEqual([]);
  });

  test("proxyMetadata ISTIO_META_DNS_AUTO_ALLOCATE is a warning naming its layer", () => {
    const r = validate({ proxyMetadata: { ISTIO_META_DNS_AUTO_ALLOCATE: "true" } }, { proxyMetadata: "PROXY_CONFIG" });
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual(["PROXY_CONFIG: proxyMetadata: 'ISTIO_META_DNS_AUTO_ALLOCATE' is deprecated; use DNS auto-allocation v2"]);
    expect(validate({ proxyMetadata: { OTHER: "1" } }).warnings).toEqual([]);
  });

  test("the input is not modified", () => {
    const input = { ...defaultProxyConfig(), proxyAdminPort: "15001" } as unknown as ProxyConfig;
    validateProxyConfig(input, {});
    expect(input.proxyAdminPort as unknown).toBe("15001");
  });
});
