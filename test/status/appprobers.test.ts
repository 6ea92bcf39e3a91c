import { describe, expect, test } from "bun:test";
import { DEFAULT_PROBE_TIMEOUT_MS, parseAppProbers } from "../../src/status/appprobers.ts";

describe("ISTIO_KUBE_APP_PROBERS", () => {
  test("valid probers of each kind", () => {
    const p = parseAppProbers(
      JSON.stringify({
        "/app-health/web/livez": {
          httpGet: { path: "healthz", port: 8080, scheme: "HTTPS", httpHeaders: [{ name: "X-Custom", value: "1" }] },
          timeoutSeconds: 3,
        },
        "/app-health/web/readyz": { tcpSocket: { port: 8081 } },
        "/app-health/grpc/startupz": { grpc: { port: 9000, service: "svc" }, timeoutSeconds: 2 },
        "/app-lifecycle/web/prestopz": { httpGet: { port: 80 } },
      }),
    );
    expect(p.configError).toBeUndefined();
    expect(p.invalid.size).toBe(0);
    expect(p.probes.get("/app-health/web/livez")).toEqual({
      kind: "httpGet",
      port: 8080,
      path: "/healthz",
      scheme: "https",
      headers: [["X-Custom", "1"]],
      timeoutMs: 3000,
    });
    expect(p.probes.get("/app-health/web/readyz")).toEqual({ kind: "tcpSocket", port: 8081, timeoutMs: DEFAULT_PROBE_TIMEOUT_MS });
    expect(p.probes.get("/app-health/grpc/startupz")).toEqual({ kind: "grpc", port: 9000, service: "svc", timeoutMs: 2000 });
    expect(p.probes.get("/app-lifecycle/web/prestopz")).toMatchObject({ kind: "httpGet", path: "/", scheme: "http" });
  });

  test("empty means no probes", () => {
    expect(parseAppProbers("").probes.size).toBe(0);
    expect(parseAppProbers("").configError).toBeUndefined();
  });

  test("bad JSON names the variable and the parse error", () => {
    const p = parseAppProbers(`{"/app-health/a/livez": {httpGet: }`);
    expect(p.configError).toMatch(/^ISTIO_KUBE_APP_PROBERS: failed to decode app prober config \(.+\); json string = \{"\/app-health\/a\/livez"/);
    expect(parseAppProbers("[1,2]").configError).toBe("ISTIO_KUBE_APP_PROBERS: want a JSON object mapping probe paths to probers, got an array");
  });

  // [path, prober, reason, Istio refuses it at start (NewServer error)?]
  const bad: [string, unknown, RegExp, boolean][] = [
    [
      "/bad-path/a/livez",
      { httpGet: { port: 80 } },
      /invalid path "\/bad-path\/a\/livez", must be in form of regex pattern \^\/\(app-health\|app-lifecycle\)/,
      true,
    ],
    ["/app-health/a/notaprobe", { httpGet: { port: 80 } }, /invalid path/, true],
    ["/app-health/a/b/livez", { httpGet: { port: 80 } }, /invalid path/, true],
    ["/app-health/a/livez", { httpGet: { port: "http" } }, /invalid prober config for \/app-health\/a\/livez, the port must be int type \(got "http"\)/, true],
    ["/app-health/a/livez", { tcpSocket: { port: "8080" } }, /the port must be int type/, true],
    ["/app-health/a/livez", { httpGet: { port: 80.5 } }, /the port must be int type/, true],
    ["/app-health/a/livez", { grpc: { port: "9000" } }, /the port must be int type/, true],
    ["/app-health/a/livez", { httpGet: { port: 70000 } }, /port 70000 is out of range/, false],
    ["/app-health/a/livez", {}, /must be exactly one of type httpGet, tcpSocket or gRPC \(found none\)/, true],
    ["/app-health/a/livez", { timeoutSeconds: 1 }, /found none/, true],
    [
      "/app-health/a/livez",
      { httpGet: { port: 80 }, tcpSocket: { port: 81 } },
      /must be exactly one of type httpGet, tcpSocket or gRPC \(found httpGet and tcpSocket\)/,
      true,
    ],
    ["/app-health/a/livez", { httpGet: { port: 80 }, timeoutSeconds: "1" }, /timeoutSeconds must be an integer/, true],
    ["/app-health/a/livez", { httpGet: { port: 80, scheme: "FTP" } }, /scheme must be HTTP or HTTPS/, false],
    ["/app-health/a/livez", null, /want an object/, true],
  ];
  for (const [path, prober, want, fatal] of bad) {
    test(`refuses ${path} ${JSON.stringify(prober)}${fatal ? " (fatal at start, as Istio)" : " (entry only)"}`, () => {
      const p = parseAppProbers(JSON.stringify({ [path]: prober, "/app-health/ok/livez": { tcpSocket: { port: 1 } } }));
      expect(p.invalid.get(path)).toMatch(want);
      expect(p.rejected).toEqual(fatal ? [p.invalid.get(path)!] : []);
      expect(p.invalid.get(path)).toStartWith("ISTIO_KUBE_APP_PROBERS: ");
      expect(p.probes.has(path)).toBe(false);
      // the other entry keeps working
      expect(p.probes.has("/app-health/ok/livez")).toBe(true);
    });
  }
});
