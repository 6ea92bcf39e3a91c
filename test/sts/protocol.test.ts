// The pure parts of the token exchange protocol: Go's strict form parsing, Go's JSON and time
// layouts, against literals worked out from Go's net/url and encoding/json behaviour.

import { describe, expect, test } from "bun:test";
import { errorBody, goJsonIndent, goTimeJson, parseForm, successBody } from "../../src/sts/protocol.ts";

describe("parseForm (Go's url.ParseQuery)", () => {
  test("first value wins, + is a space, percent escapes decode to UTF-8 bytes", () => {
    const f = parseForm("a=1&a=2&b=x+y%2Bz&c=%E2%82%AC&d&=e");
    expect(f.get("a")).toBe("1");
    expect(f.get("b")).toBe("x y+z");
    expect(f.get("c")).toBe("€");
    expect(f.get("d")).toBe("");
    expect(f.get("")).toBe("e");
  });
  test("a bad escape and a semicolon are errors, as in Go", () => {
    expect(() => parseForm("a=%g1")).toThrow('invalid URL escape "%g1"');
    expect(() => parseForm("a=%4")).toThrow('invalid URL escape "%4"');
    expect(() => parseForm("a=1;b=2")).toThrow("invalid semicolon separator in query");
  });
});

describe("Go's JSON layouts", () => {
  test("HTML-sensitive characters are escaped as encoding/json does", () => {
    expect(goJsonIndent({ a: "<b>&" }, " ")).toBe('{\n "a": "\\u003cb\\u003e\\u0026"\n}');
  });
  test("error and success bodies", () => {
    expect(errorBody("invalid_request", "x")).toBe('{\n  "error": "invalid_request",\n  "error_description": "x",\n  "error_uri": ""\n}');
    expect(successBody("t", 5)).toBe(
      '{\n "access_token": "t",\n "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",\n "token_type": "Bearer",\n "expires_in": 5,\n "scope": "",\n "refresh_token": ""\n}',
    );
  });
  test("times as RFC3339Nano: trailing zeros of the fraction dropped", () => {
    expect(goTimeJson(Date.parse("2030-01-01T00:00:00.000Z"))).toBe("2030-01-01T00:00:00Z");
    expect(goTimeJson(Date.parse("2030-01-01T00:00:00.120Z"))).toBe("2030-01-01T00:00:00.12Z");
    expect(goTimeJson(Date.parse("2030-01-01T00:00:00.007Z"))).toBe("2030-01-01T00:00:00.007Z");
  });
});
