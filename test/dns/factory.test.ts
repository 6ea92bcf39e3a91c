// createDnsProxy from an AgentConfig: resolv.conf read from a temp file, upstream port injected,
// `localhost` bound as 127.0.0.1 for an IPv4 nameserver, DNS_* variables honoured.

import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentConfig } from "../../src/config/agentconfig.ts";
import { createDnsProxy } from "../../src/dns/factory.ts";
import { nameInfo } from "../../src/dns/nametable.ts";
import { LogSink } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { testRequiring } from "../support/requires.ts";
import { dig, DIG, startUpstream } from "./helpers.ts";
import { testConfig } from "../support/config.ts";

const dir = mkdtempSync(join(tmpdir(), "dns-factory-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A sidecar with DNS capture in namespace ns1, uid 1337, through the real loader. */
function cfg(env: Record<string, string>): AgentConfig {
  return testConfig({
    env: { POD_NAMESPACE: "ns1", ISTIO_META_DNS_CAPTURE: "true", DNS_PROXY_ADDR: "localhost:0", DNS_FORWARD_TIMEOUT: "1s", ...env },
    uid: 1337,
  });
}

test("unreadable resolv.conf is an init error naming the file", () => {
  const deps = { log: new LogSink({ write: () => {} }).logger(), registry: newRegistry(), readiness: new Readiness() };
  expect(() => createDnsProxy(cfg({}), { ...deps, resolvConfPath: join(dir, "missing.conf") })).toThrow(/missing\.conf/);
});

test("a non-root `:53` logs an error and falls back to localhost:15053", () => {
  const lines: string[] = [];
  const deps = { log: new LogSink({ write: (l) => lines.push(l) }).logger(), registry: newRegistry(), readiness: new Readiness() };
  const rc = join(dir, "empty.conf");
  writeFileSync(rc, "");
  createDnsProxy(cfg({ DNS_PROXY_ADDR: ":53" }), { ...deps, resolvConfPath: rc });
  expect(lines.some((l) => l.includes("\terror\tdns\t") && l.includes("localhost:15053"))).toBe(true);
});

testRequiring(DIG, "built from config: binds 127.0.0.1, forwards to resolv.conf's nameserver, answers the table", async () => {
  const up = await startUpstream({ answers: { "www.bing.com": "1.1.1.1" } });
  const rc = join(dir, "resolv.conf");
  writeFileSync(rc, `nameserver 127.0.0.1\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n`);
  const readiness = new Readiness();
  const proxy = createDnsProxy(cfg({}), {
    log: new LogSink({ write: () => {} }).logger(),
    registry: newRegistry(),
    readiness,
    resolvConfPath: rc,
    upstreamPort: up.port,
  });
  const ac = new AbortController();
  try {
    expect(readiness.isReady()).toBe(false);
    await proxy.start(ac.signal);
    const addrs = proxy.addresses();
    expect(addrs.map((a) => `${a.protocol} ${a.host}`)).toEqual(["udp 127.0.0.1", "tcp 127.0.0.1"]);
    proxy.setTable({
      table: { "reviews.ns1.svc.cluster.local": nameInfo({ ips: ["10.0.0.7"], registry: "Kubernetes", shortname: "reviews", namespace: "ns1" }) },
    });
    expect(readiness.isReady()).toBe(true);
    const port = addrs[0]!.port;
    expect((await dig(port, "www.bing.com")).data).toEqual(["1.1.1.1"]);
    // search list from the file drives the CNAME short-cut
    expect((await dig(port, "reviews.ns1.svc.cluster.local")).data).toEqual(["10.0.0.7"]);
    expect((await dig(port, "reviews.ns1.ns1.svc.cluster.local")).data).toEqual(["reviews.ns1.", "10.0.0.7"]);
  } finally {
    ac.abort();
    await proxy.stopped();
    up.close();
  }
});
