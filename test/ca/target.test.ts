// CA_ADDR as gRPC reads a target, and grpc-timeout's encoding (gRPC's PROTOCOL-HTTP2).

import { describe, expect, test } from "bun:test";
import { caTarget } from "../../src/ca/target.ts";
import { CaError } from "../../src/ca/errors.ts";
import { grpcTimeout } from "../../src/xds/unary.ts";

describe("caTarget", () => {
  test.each([
    ["istiod.istio-system.svc:15012", "istiod.istio-system.svc", 15012, "istiod.istio-system.svc:15012"],
    ["10.0.0.1:15012", "10.0.0.1", 15012, "10.0.0.1:15012"],
    ["[fd00::1]:15012", "fd00::1", 15012, "[fd00::1]:15012"],
    ["[fd00::1]", "fd00::1", 443, "[fd00::1]"],
    ["ca.example.com", "ca.example.com", 443, "ca.example.com"],
    ["dns:///ca.example.com:8443", "ca.example.com", 8443, "ca.example.com:8443"],
    ["dns://8.8.8.8/ca.example.com:8443", "ca.example.com", 8443, "ca.example.com:8443"],
    ["DNS:///ca.example.com:8443", "ca.example.com", 8443, "ca.example.com:8443"],
    ["fd00::1", "fd00::1", 443, "fd00::1"],
    ["[fe80::1%eth0]:15012", "fe80::1%eth0", 15012, "[fe80::1%eth0]:15012"],
    ["istiod_1.ns-2.svc:15012", "istiod_1.ns-2.svc", 15012, "istiod_1.ns-2.svc:15012"],
    ["h:1", "h", 1, "h:1"],
    ["h:65535", "h", 65535, "h:65535"],
  ])("%s", (address, host, port, authority) => expect(caTarget(address)).toEqual({ host, port, authority }));

  test.each([
    ":15012",
    "h:0",
    "h:65536",
    "h:x1",
    "h:1x",
    "h:-1",
    "[::1]:abc",
    "[::1]:1x",
    "h:",
    "[::1]:",
    "1a://b/c:2",
    "x[::1]:80",
    "h/p:1",
    "u@h:1",
    "h h:1",
    "[]:1",
  ])("%s is a config error naming it", (address) => {
    let err: unknown;
    try {
      caTarget(address);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CaError);
    expect((err as CaError).kind).toBe("config");
    expect((err as CaError).message).toBe(`CA address "${address}" is not host:port (CA_ADDR, or the discovery address)`);
  });
});

describe("grpc-timeout", () => {
  test.each([
    [10_000, "10000m"],
    [0.2, "1m"],
    [0, "1m"],
    [1.5, "2m"],
    [99_999_999, "99999999m"],
    [100_000_000, "100000S"],
    [1e15, "99999999S"],
  ])("%d ms -> %s", (ms, want) => expect(grpcTimeout(ms)).toBe(want));
});
