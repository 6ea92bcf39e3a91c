import { describe, expect, test } from "bun:test";
import { formatGoDuration, formatProtoDuration, parseAnyDuration, parseGoDuration, parseProtoDuration } from "../../src/lib/duration.ts";

describe("Go durations", () => {
  test.each([
    ["45s", 45_000],
    ["1m0s", 60_000],
    ["1h2m3.5s", 3_723_500],
    ["500ms", 500],
    ["1.5h", 5_400_000],
    ["-5s", -5000],
    ["0", 0],
    ["100us", 0.1],
    ["2h45m", 9_900_000],
  ])("parse %s", (input, ms) => {
    expect(parseGoDuration(input)).toBeCloseTo(ms, 9);
  });

  test.each(["", "5", "s", "5x", "1h-2m", "--5s", "abc"])("rejects %p", (input) => {
    expect(() => parseGoDuration(input)).toThrow(/duration/);
  });

  test.each([
    [45_000, "45s"],
    [60_000, "1m0s"],
    [3_723_500, "1h2m3.5s"],
    [500, "500ms"],
    [0, "0s"],
    [1.5, "1.5ms"],
    [0.0005, "500ns"],
    [-5000, "-5s"],
    [86_400_000, "24h0m0s"],
  ])("format %d ms as %s", (ms, text) => {
    expect(formatGoDuration(ms)).toBe(text);
  });

  test("round trip", () => {
    for (const s of ["1h2m3.5s", "45s", "1m0s", "250ms", "3h0m0s"]) expect(formatGoDuration(parseGoDuration(s))).toBe(s);
  });
});

describe("protobuf JSON durations", () => {
  test.each([
    ["5s", 5000],
    ["0.500s", 500],
    ["1.000000001s", 1000.000001],
    ["-1.5s", -1500],
  ])("parse %s", (input, ms) => expect(parseProtoDuration(input)).toBeCloseTo(ms, 9));
  test.each([
    [5000, "5s"],
    [500, "0.500s"],
    [1000.001, "1.000001s"],
    [0, "0s"],
  ])("format %d", (ms, text) => expect(formatProtoDuration(ms)).toBe(text));
  test("rejects Go style where proto is required", () => expect(() => parseProtoDuration("1m")).toThrow(/protobuf duration/));
  test("parseAnyDuration accepts both", () => {
    expect(parseAnyDuration("1m30s")).toBe(90_000);
    expect(parseAnyDuration("2.5s")).toBe(2500);
  });
});
