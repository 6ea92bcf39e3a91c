import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chooseXdsRoot, dialConfigFrom, splitHostPort, upstreamMetadata, usesTls, xdsServerName, type RootInputs } from "../../src/xds/upstream-config.ts";
import { testConfig } from "./harness.ts";
import { encodeGrpcMessage } from "../../src/xds/downstream.ts";
import { decodeGrpcMessage, httpStatusToCode } from "../../src/xds/upstream.ts";
import { routeOf, NAME_TABLE_TYPE, WORKLOAD_TYPE } from "../../src/xds/types.ts";
import { terminationType } from "../../src/xds/metrics.ts";

const base: RootInputs = { xdsRootCa: "", provCert: "", fileMountedCerts: false, mountedRootCert: "", pilotCertProvider: "istiod", exists: () => false };

describe("root CA order (FindRootCAForXDS)", () => {
  test.each([
    ["XDS_ROOT_CA=SYSTEM", { xdsRootCa: "SYSTEM" }, { kind: "system" }],
    ["XDS_ROOT_CA path", { xdsRootCa: "/x/root.pem", exists: () => true }, { kind: "file", path: "/x/root.pem" }],
    [
      "legacy ./etc/certs/root-cert.pem when present",
      { exists: (p: string) => p === "./etc/certs/root-cert.pem", provCert: "/prov" },
      { kind: "file", path: "./etc/certs/root-cert.pem" },
    ],
    ["PROV_CERT", { provCert: "/prov/" }, { kind: "file", path: "/prov/root-cert.pem" }],
    [
      "FILE_MOUNTED_CERTS",
      { fileMountedCerts: true, mountedRootCert: "/m/root.pem", exists: (p: string) => p === "/m/root.pem" },
      { kind: "file", path: "/m/root.pem" },
    ],
    [
      "default mesh root",
      { exists: (p: string) => p === "./var/run/secrets/istio/root-cert.pem" },
      { kind: "file", path: "./var/run/secrets/istio/root-cert.pem" },
    ],
  ])("%s", (_n, over, want) => {
    expect(chooseXdsRoot({ ...base, ...over } as RootInputs)).toEqual(want as never);
  });
  test("PILOT_CERT_PROVIDER=none without a root is an error naming XDS_ROOT_CA", () => {
    expect(() => chooseXdsRoot({ ...base, pilotCertProvider: "none" })).toThrow(/XDS_ROOT_CA/);
  });
  test("missing root CA where Istio requires one: an error naming the file (default, XDS_ROOT_CA, mounted root)", () => {
    expect(() => chooseXdsRoot(base)).toThrow("root CA file for XDS does not exist ./var/run/secrets/istio/root-cert.pem");
    expect(() => chooseXdsRoot({ ...base, xdsRootCa: "/x/root.pem" })).toThrow("root CA file for XDS does not exist /x/root.pem (XDS_ROOT_CA)");
    expect(() => chooseXdsRoot({ ...base, fileMountedCerts: true, mountedRootCert: "/m/root.pem" })).toThrow("root CA file for XDS does not exist /m/root.pem");
    // PROV_CERT's root is taken on trust, as Istio (VMs write it later).
    expect(chooseXdsRoot({ ...base, provCert: "/prov" })).toEqual({ kind: "file", path: "/prov/root-cert.pem" });
  });
});

describe("dial parameters", () => {
  test("host:port parsing", () => {
    expect(splitHostPort("istiod.istio-system.svc:15012")).toEqual({ host: "istiod.istio-system.svc", port: 15012 });
    expect(splitHostPort("[::1]:15012")).toEqual({ host: "::1", port: 15012 });
    expect(() => splitHostPort("istiod")).toThrow(/discoveryAddress "istiod"/);
  });
  test("server name", () => {
    expect(xdsServerName("istiod.istio-system.svc", "")).toBe("istiod.istio-system.svc");
    expect(xdsServerName("localhost", "")).toBe("istiod.istio-system.svc");
    expect(xdsServerName("10.0.0.1", "istiod.custom")).toBe("istiod.custom");
  });
  test("xDS upstream is TLS unless the auth policy is NONE (port 15010 alone does not turn TLS off)", () => {
    expect(usesTls("MUTUAL_TLS")).toBe(true);
    expect(usesTls(undefined)).toBe(true);
    expect(usesTls("NONE")).toBe(false);
    const root = mkdtempSync(join(tmpdir(), "upstream-15010-"));
    try {
      mkdirSync(join(root, "var/run/secrets/istio"), { recursive: true });
      writeFileSync(join(root, "var/run/secrets/istio/root-cert.pem"), "root");
      const files = { exists: (p: string) => existsSync(p), read: () => undefined };
      const tls = dialConfigFrom(testConfig(root, {}, { discoveryAddress: "istiod.istio-system.svc:15010", controlPlaneAuthPolicy: "MUTUAL_TLS" }), files);
      expect(tls.tls?.root).toEqual({ kind: "file", path: join(root, "var/run/secrets/istio/root-cert.pem") });
      expect(tls.tls?.servername).toBe("istiod.istio-system.svc");
      const plain = dialConfigFrom(testConfig(root, {}, { discoveryAddress: "istiod.istio-system.svc:15012", controlPlaneAuthPolicy: "NONE" }), files);
      expect(plain.tls).toBeUndefined();
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
  test("metadata: token, ClusterID, XDS_HEADER_*", () => {
    expect(upstreamMetadata("tok", "c1", { FOO: "bar" })).toEqual({ foo: "bar", clusterid: "c1", authorization: "Bearer tok" });
    expect(upstreamMetadata(undefined, "", {})).toEqual({});
  });
});

describe("statuses and routes", () => {
  test("grpc-message encoding round trip", () => {
    const m = "bad 100% ünïcode\nline";
    expect(encodeGrpcMessage(m)).not.toMatch(/[^\x20-\x7e]/);
    expect(decodeGrpcMessage(encodeGrpcMessage(m))).toBe(m);
  });
  test("HTTP status mapping", () => {
    expect(httpStatusToCode(503)).toBe(14);
    expect(httpStatusToCode(401)).toBe(16);
    expect(httpStatusToCode(500)).toBe(2);
  });
  test("forward filter", () => {
    const internal = new Set([NAME_TABLE_TYPE]);
    expect(routeOf("type.googleapis.com/envoy.config.cluster.v3.Cluster", internal)).toBe("forward");
    expect(routeOf(WORKLOAD_TYPE, internal)).toBe("forward");
    expect(routeOf(NAME_TABLE_TYPE, internal)).toBe("internal");
    expect(routeOf("type.googleapis.com/istio.mesh.v1alpha1.ProxyConfig", internal)).toBe("drop");
  });
  test("termination types", () => {
    expect(terminationType({ code: 1, message: "" })).toBe("cancelled");
    expect(terminationType({ code: 14, message: "transport is closing" })).toBe("cancelled");
    expect(terminationType({ code: 13, message: "boom" })).toBe("error");
  });
});
