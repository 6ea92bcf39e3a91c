// csrMetadata alone: the headers grpc-go would write for ClusterID, CA_HEADER_* and the token.

import { expect, test } from "bun:test";
import { CaError } from "../../src/ca/errors.ts";
import { csrMetadata } from "../../src/ca/metadata.ts";

function error(f: () => unknown): CaError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(CaError);
    return e as CaError;
  }
  throw new Error("no error");
}

test("names lowercased, in order, the token last as a bearer", () => {
  expect(csrMetadata({ ClusterID: "Kubernetes", "X-A": "1", "x_b.c-9": "sp ace~!" }, "t0k", "token file /t")).toEqual([
    ["clusterid", "Kubernetes"],
    ["x-a", "1"],
    ["x_b.c-9", "sp ace~!"],
    ["authorization", "Bearer t0k"],
  ]);
});

test("no token or an empty one: no authorization header; an empty value is sent", () => {
  expect(csrMetadata({ ClusterID: "" }, undefined, "token file /t")).toEqual([["clusterid", ""]]);
  expect(csrMetadata({}, "", "token file /t")).toEqual([]);
});

test("-bin values: base64 of the UTF-8 bytes without padding, any bytes allowed", () => {
  expect(csrMetadata({ "a-bin": "ab", "b-bin": "a", "c-bin": "abc", "d-bin": "é\n" }, undefined, "")).toEqual([
    ["a-bin", "YWI"],
    ["b-bin", "YQ"],
    ["c-bin", "YWJj"],
    ["d-bin", "w6kK"],
  ]);
});

test("gRPC's reserved names are dropped, whatever their case", () => {
  const reserved = [
    "Content-Type",
    "user-agent",
    "grpc-message-type",
    "grpc-encoding",
    "grpc-message",
    "grpc-status",
    "grpc-timeout",
    "grpc-status-details-bin",
    "TE",
  ];
  expect(csrMetadata(Object.fromEntries(reserved.map((k) => [k, "x"])), undefined, "")).toEqual([]);
  expect(csrMetadata({ "grpc-other": "1", tee: "2", "content-types": "3" }, undefined, "")).toEqual([
    ["grpc-other", "1"],
    ["tee", "2"],
    ["content-types", "3"],
  ]);
});

test("a name outside [0-9a-z_.-] (after lowercasing) is a config error naming it", () => {
  for (const k of ["bad name", "a:b", "", "é", "a/b"]) {
    const e = error(() => csrMetadata({ [k]: "v" }, undefined, ""));
    expect(e.kind).toBe("config");
    expect(e.message).toBe(`gRPC metadata "${k}" for the CA: the name may hold only letters, digits, "_", "." and "-"`);
  }
});

test("a value outside printable ASCII is a config error naming the header, not the value", () => {
  for (const v of ["line\nbreak", "tab\there", "del\x7f", "é", "nul\0"]) {
    const e = error(() => csrMetadata({ "X-Key": v }, undefined, ""));
    expect(e.kind).toBe("config");
    expect(e.message).toBe(`gRPC metadata "X-Key" for the CA: the value may hold only printable ASCII characters`);
  }
});

test("a token a header cannot carry is a token error naming its source, never the token", () => {
  for (const t of ["se cret\n", "secret\x01", "sécret"]) {
    const e = error(() => csrMetadata({}, t, "token file /var/t"));
    expect(e.kind).toBe("token");
    expect(e.message).toBe("the token from token file /var/t holds characters a gRPC header cannot carry");
  }
  expect(csrMetadata({}, " ~", "")).toEqual([["authorization", "Bearer  ~"]]);
});
