// Pure pieces as tables: SotW decisions, rotation delay, jitter, backoff, resource names.

import { describe, expect, test } from "bun:test";
import { sotwDecide } from "../../src/sds/sotw.ts";
import { backoffMs, closeToExpiry, jitteredRatio, RENEW_BACKOFF, rotationDelayMs, WARM_BACKOFF } from "../../src/sds/rotation.ts";
import { parseResourceName } from "../../src/sds/resources.ts";
import { retryDelayMs } from "../../src/ca/retry.ts";

const S = (watched: string[], lastNonce?: string, seen = true) => ({ watched: new Set(watched), lastNonce, seenRequest: seen });

describe("sotwDecide", () => {
  test.each([
    ["first request", S([], undefined, false), { resourceNames: ["default"], responseNonce: "" }, "respond", ["default"]],
    ["empty nonce re-request", S(["default"], "n1"), { resourceNames: ["default"], responseNonce: "" }, "respond", ["default"]],
    ["ACK", S(["default"], "n1"), { resourceNames: ["default"], responseNonce: "n1" }, "ignore", undefined],
    ["stale nonce", S(["default"], "n2"), { resourceNames: ["default", "ROOTCA"], responseNonce: "n1" }, "ignore", undefined],
    ["added names", S(["default"], "n1"), { resourceNames: ["default", "ROOTCA"], responseNonce: "n1" }, "respond", ["ROOTCA"]],
    ["removed names", S(["default", "ROOTCA"], "n1"), { resourceNames: ["default"], responseNonce: "n1" }, "ignore", undefined],
    ["unsubscribe", S(["default"], "n1"), { resourceNames: [], responseNonce: "n1" }, "unsubscribe", undefined],
    ["NACK", S(["default"], "n1"), { resourceNames: ["default"], responseNonce: "n1", errorDetail: { code: 13 } }, "nack", undefined],
  ] as const)("%s", (_n, state, req, action, names) => {
    const d = sotwDecide(state, { ...req, resourceNames: [...req.resourceNames] });
    expect(d.action).toBe(action);
    if (names) expect(d.action === "respond" && d.names).toEqual([...names]);
  });
});

describe("rotation", () => {
  test.each([
    // created, expire, now, ratio -> delay
    [0, 1000, 0, 0.5, 500],
    [0, 1000, 400, 0.5, 100],
    [0, 1000, 900, 0.5, 0],
    [0, 86_400_000, 0, 0.5, 43_200_000],
  ])("rotationDelayMs(%d,%d,%d,%d) = %d", (c, e, n, r, want) => expect(rotationDelayMs(c, e, n, r)).toBe(want));
  test("jitteredRatio stays within ratio ± jitter and clamps to [0,1]", () => {
    expect(jitteredRatio({ ratio: 0.5, jitter: 0.01 }, () => 0.25)).toBeCloseTo(0.5 - 0.0025, 6);
    expect(jitteredRatio({ ratio: 0.5, jitter: 0.01 }, () => 0.75)).toBeCloseTo(0.5 + 0.0075, 6);
    expect(jitteredRatio({ ratio: 0.99, jitter: 0.5 }, () => 0.9)).toBe(1);
  });
  test("backoff doubles and caps", () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 10, 20].map((n) => backoffMs(n, WARM_BACKOFF, mid))).toEqual([500, 1000, 2000, 60_000, 60_000]);
    expect(backoffMs(1, RENEW_BACKOFF, () => 0)).toBeCloseTo(900, 6);
  });
  test("closeToExpiry at 10% of the lifetime", () => {
    expect(closeToExpiry(0, 1000, 850)).toBe(false);
    expect(closeToExpiry(0, 1000, 950)).toBe(true);
  });
  test("CA retry delays", () => expect([0, 1, 2, 3, 4].map((a) => retryDelayMs(a, () => 0.5))).toEqual([0, 100, 200, 400, 800]));
});

describe("parseResourceName", () => {
  test.each([
    ["default", { kind: "default" }],
    ["ROOTCA", { kind: "rootca" }],
    ["file-root:system", { kind: "system-root" }],
    ["file-cert:/a/c.pem~/a/k.pem", { kind: "file-cert", certPath: "/a/c.pem", keyPath: "/a/k.pem" }],
    ["file-root:/a/ca.pem", { kind: "file-root", caPath: "/a/ca.pem" }],
  ])("%s", (n, want) => expect(parseResourceName(n)).toEqual(want as never));
  test.each(["file-cert:/a/c.pem", "file-root:", "other"])("%s is invalid with a reason naming it", (n) => {
    const r = parseResourceName(n);
    expect(r.kind).toBe("invalid");
    expect(r.kind === "invalid" && r.reason).toContain(n);
  });
});
