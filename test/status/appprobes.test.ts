// App probes with the status port on the agent's event loop (the suite: appprobes-suite.ts), and
// what only this listener needs: a probe to the pod's own IP, Host rewriting.
import { describe, expect, test } from "bun:test";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { rewriteHostPort } from "../../src/status/apphandler.ts";
import { StatusServer } from "../../src/status/server.ts";
import { nonLoopbackIPv4, startHttpApp } from "../support/status-apps.ts";
import { testRequiring, type Requirements } from "../support/requires.ts";
import { appProbeSuite } from "./appprobes-suite.ts";

const NON_LOOPBACK_IP = nonLoopbackIPv4();
const HAS_NON_LOOPBACK: Requirements = { check: () => (NON_LOOPBACK_IP === undefined ? "a non-loopback IPv4 address on this machine" : undefined) };

appProbeSuite();

describe("probe to the pod IP from 127.0.0.6", () => {
  const ip = NON_LOOPBACK_IP;
  testRequiring(HAS_NON_LOOPBACK, "reaches the app on a non-loopback local address, leaving from 127.0.0.6", async () => {
    const http = startHttpApp({ "/ok": () => new Response("all good") }, { hostname: "0.0.0.0" });
    const s = new StatusServer({
      port: 0,
      hostname: "127.0.0.1",
      log: memoryLogger().log,
      registry: newRegistry(),
      probeDestination: ip!,
      probeSourceAddress: "127.0.0.6",
      appProbers: JSON.stringify({ "/app-health/web/livez": { httpGet: { path: "/ok", port: http.port } } }),
    });
    try {
      const r = await s.handle(new Request("http://x/app-health/web/livez"), "127.0.0.1");
      expect(r.status).toBe(200);
      expect(http.seen.filter((x) => x.path === "/ok").at(-1)!.remote).toMatch(/127\.0\.0\.6$/);
    } finally {
      await http.close();
    }
  });
});

test("rewriteHostPort", () => {
  expect(rewriteHostPort("10.0.0.5:15020", 15020, 8080)).toBe("10.0.0.5:8080");
  expect(rewriteHostPort("[fd00::5]:15020", 15020, 8080)).toBe("[fd00::5]:8080");
  expect(rewriteHostPort("10.0.0.5:9999", 15020, 8080)).toBe("10.0.0.5:9999");
  expect(rewriteHostPort("example.com", 15020, 8080)).toBe("example.com");
});
