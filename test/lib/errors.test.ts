import { describe, expect, test } from "bun:test";
import { errorMessage } from "../../src/lib/errors.ts";
import { CaError } from "../../src/ca/errors.ts";
import { certInfo } from "../../src/ca/pem.ts";

describe("errorMessage", () => {
  test("an Error gives its message", () => {
    expect(errorMessage(new Error("boom"))).toBe("boom");
    expect(errorMessage(new TypeError("bad type"))).toBe("bad type");
  });

  test("an Error without a message gives its name", () => {
    expect(errorMessage(new RangeError())).toBe("RangeError");
  });

  test("a system error's code is added when the message does not name it", () => {
    const e = Object.assign(new Error("Unable to connect"), { code: "ConnectionRefused" });
    expect(errorMessage(e)).toBe("Unable to connect (ConnectionRefused)");
    const named = Object.assign(new Error("ENOENT: no such file or directory, open '/x'"), { code: "ENOENT" });
    expect(errorMessage(named)).toBe("ENOENT: no such file or directory, open '/x'");
  });

  test("a thrown string is itself", () => {
    expect(errorMessage("plain text")).toBe("plain text");
  });

  test("a non-Error object with a message (a gRPC status, a DOMException-like) gives the message", () => {
    expect(errorMessage({ code: 14, details: "x", message: "14 UNAVAILABLE: no healthy upstream" })).toBe("14 UNAVAILABLE: no healthy upstream");
  });

  test("other objects are shown as JSON, not [object Object]", () => {
    expect(errorMessage({ reason: "closed", code: 2 })).toBe('{"reason":"closed","code":2}');
    expect(errorMessage({ message: 42 })).toBe('{"message":42}');
  });

  test("an object that cannot be serialised still gives a line", () => {
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(errorMessage(loop)).toBe("[object Object]");
  });

  test("null, undefined and numbers", () => {
    expect(errorMessage(null)).toBe("null");
    expect(errorMessage(undefined)).toBe("undefined");
    expect(errorMessage(7)).toBe("7");
  });
});

describe("rethrown errors keep their cause", () => {
  test("a certificate that does not parse: CaError naming what, node:crypto's error as cause", () => {
    let caught: unknown;
    try {
      certInfo("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n", "workload certificate");
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(CaError);
    expect((caught as Error).message).toStartWith("workload certificate: not a valid PEM certificate (");
    const cause = (caught as Error).cause;
    expect(cause).toBeInstanceOf(Error);
    expect((caught as Error).message).toContain((cause as Error).message);
  });
});
