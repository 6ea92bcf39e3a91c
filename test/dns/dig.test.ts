// The DNS proxy against real `dig` (Debian dnsutils) with a real upstream resolver of our own.
// Table semantics follow Istio's pkg/dns/client/dns_test.go cases.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { proxyDomain } from "../../src/dns/althosts.ts";
import { nameInfo } from "../../src/dns/nametable.ts";
import { DnsProxy, type DnsProxyOptions } from "../../src/dns/proxy.ts";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry, type Registry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { describeRequiring } from "../support/requires.ts";
import { dig, DIG, istioTestTable, ISTIO_TEST_SEARCH, startUpstream, type TestUpstream } from "./helpers.ts";

const d = (name: string, fn: () => void) => describeRequiring(DIG, name, fn);

interface Running {
  proxy: DnsProxy;
  port: number;
  registry: Registry;
  readiness: Readiness;
  stop(): void;
}

async function startProxy(over: Partial<DnsProxyOptions> & Pick<DnsProxyOptions, "upstreams">, table = true): Promise<Running> {
  const registry = newRegistry();
  const readiness = new Readiness();
  const proxy = new DnsProxy({
    listen: [{ host: "127.0.0.1", port: 0 }],
    search: ISTIO_TEST_SEARCH,
    proxyDomain: proxyDomain("ns1", "ns1.svc.cluster.local"),
    respondBeforeSync: false,
    forwardParallel: false,
    forwardTimeoutMs: 2000,
    log: silentLogger(),
    registry,
    readiness,
    ...over,
  });
  const ac = new AbortController();
  await proxy.start(ac.signal);
  if (table) {
    const t = istioTestTable();
    t.table["headless.ns1.svc.cluster.local"] = nameInfo({
      ips: Array.from({ length: 100 }, (_, i) => `10.0.${i >> 8}.${i & 0xff}`),
      registry: "Kubernetes",
      shortname: "headless",
      namespace: "ns1",
    });
    proxy.setTable(t);
  }
  const port = proxy.addresses()[0]!.port;
  return { proxy, port, registry, readiness, stop: () => ac.abort() };
}

async function metric(reg: Registry, name: string): Promise<number> {
  const m = await reg.getSingleMetric(name)?.get();
  return m?.values.reduce((s, v) => s + v.value, 0) ?? 0;
}

d("table answers with dig", () => {
  let up: TestUpstream;
  let p: Running;
  beforeAll(async () => {
    up = await startUpstream({ answers: { "www.bing.com": "1.1.1.1", example: "7.7.7.7" } });
    p = await startProxy({ upstreams: [{ host: up.host, port: up.port }] });
  });
  afterAll(() => {
    p.stop();
    up.close();
  });

  const hits: [string, string, string][] = [
    ["non-Kubernetes host", "www.google.com", "1.1.1.1"],
    ["Kubernetes FQDN", "productpage.ns1.svc.cluster.local", "9.9.9.9"],
    ["name.namespace", "productpage.ns1", "9.9.9.9"],
    ["short name in the proxy's namespace", "productpage", "9.9.9.9"],
    ["name.namespace.svc", "productpage.ns1.svc", "9.9.9.9"],
    ["other namespace, name.namespace", "example.ns2", "10.10.10.10"],
    ["other namespace, name.namespace.svc", "example.ns2.svc", "10.10.10.10"],
    ["alt host", "svc-with-alt.ns1.svc.clusterset.local", "15.15.15.15"],
    ["alt host short name", "svc-with-alt", "15.15.15.15"],
    ["other cluster's domain, FQDN only", "details.ns2.svc.cluster.remote", "11.11.11.11"],
    ["key with a trailing dot", "example.localhost", "3.3.3.3"],
    ["mixed case question", "ProductPage.NS1.svc.Cluster.Local", "9.9.9.9"],
  ];
  for (const [what, name, ip] of hits) {
    test(`${what}: ${name}`, async () => {
      const r = await dig(p.port, name);
      expect(r.status).toBe("NOERROR");
      expect(r.flags).toContain("aa");
      expect(r.data).toContain(ip);
      expect(r.answers.every((a) => a.includes(" 30 IN A "))).toBe(true);
    });
  }

  test("the answer echoes the question as asked", async () => {
    const r = await dig(p.port, "ProductPage.NS1");
    expect(r.answers[0]!.split(" ")[0]!.toLowerCase()).toBe("productpage.ns1.");
  });

  test("AAAA for an IPv4-only name: NOERROR, authoritative, no answer (never NXDOMAIN)", async () => {
    const r = await dig(p.port, "ipv4.localhost", "AAAA");
    expect(r.status).toBe("NOERROR");
    expect(r.flags).toContain("aa");
    expect(r.answers).toEqual([]);
    const k = await dig(p.port, "productpage.ns1.svc.cluster.local", "AAAA");
    expect(k.status).toBe("NOERROR");
    expect(k.answers).toEqual([]);
  });

  test("A for an IPv6-only name is empty; AAAA answers IPv6 only", async () => {
    expect((await dig(p.port, "ipv6.localhost", "A")).answers).toEqual([]);
    const r = await dig(p.port, "dual.localhost", "AAAA");
    expect(r.data).toEqual(["2001:db8::ff00:42:8329"]);
    expect((await dig(p.port, "dual.localhost", "A")).data).toEqual(["2.2.2.2"]);
  });

  test("search-domain expansion answers CNAME then the addresses", async () => {
    const r = await dig(p.port, "www.google.com.ns1.svc.cluster.local");
    expect(r.status).toBe("NOERROR");
    expect(r.answers).toEqual(["www.google.com.ns1.svc.cluster.local. 30 IN CNAME www.google.com.", "www.google.com. 30 IN A 1.1.1.1"]);
    const k = await dig(p.port, "productpage.ns1.ns1.svc.cluster.local");
    expect(k.answers).toEqual(["productpage.ns1.ns1.svc.cluster.local. 30 IN CNAME productpage.ns1.", "productpage.ns1. 30 IN A 9.9.9.9"]);
  });

  test("search expansion of a v4-only name asked for AAAA: NOERROR and nothing", async () => {
    const r = await dig(p.port, "productpage.ns1.ns1.svc.cluster.local", "AAAA");
    expect(r.status).toBe("NOERROR");
    expect(r.answers).toEqual([]);
  });

  test("a Kubernetes FQDN expanded with the search domain is not ours: forwarded", async () => {
    const before = up.names.length;
    const r = await dig(p.port, "productpage.ns1.svc.cluster.local.ns1.svc.cluster.local");
    expect(r.status).toBe("NXDOMAIN");
    expect(up.names.length).toBe(before + 1);
  });

  test("wildcards: closest parent wins, answer named as asked", async () => {
    expect((await dig(p.port, "foo.wildcard")).answers).toEqual(["foo.wildcard. 30 IN A 10.10.10.10"]);
    expect((await dig(p.port, "a.b.wildcard")).answers).toEqual(["a.b.wildcard. 30 IN A 11.11.11.11"]);
    expect((await dig(p.port, "foo.foons.svc.mesh.company.net")).data).toEqual(["10.1.2.3"]);
  });

  test("wildcard with search expansion chains CNAME to the wildcard", async () => {
    const r = await dig(p.port, "foo.wildcard.ns1.svc.cluster.local");
    expect(r.answers).toEqual(["foo.wildcard.ns1.svc.cluster.local. 30 IN CNAME *.wildcard.", "*.wildcard. 30 IN A 10.10.10.10"]);
  });

  test("short name of another namespace is not ours: forwarded upstream", async () => {
    const r = await dig(p.port, "example");
    expect(r.flags).not.toContain("aa");
    expect(r.data).toEqual(["7.7.7.7"]); // the upstream's answer, not the table's 10.10.10.10
  });

  test("types other than A/AAAA are forwarded even for table names", async () => {
    const before = up.received.udp;
    const r = await dig(p.port, "productpage.ns1.svc.cluster.local", "MX");
    expect(r.status).toBe("NXDOMAIN");
    expect(up.received.udp).toBe(before + 1);
  });

  test("round-robin order for multi-address entries", async () => {
    const orders = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const r = await dig(p.port, "details.ns2.svc.cluster.remote");
      expect([...r.data].sort()).toEqual(["11.11.11.11", "12.12.12.12", "13.13.13.13", "14.14.14.14"]);
      orders.add(r.data.join(","));
    }
    expect(orders.size).toBeGreaterThan(1);
  });

  test("TCP: table hit and forwarded name", async () => {
    const r = await dig(p.port, "productpage.ns1", "A", ["+tcp"]);
    expect(r.protocol).toBe("TCP");
    expect(r.data).toEqual(["9.9.9.9"]);
    const before = up.received.tcp;
    const f = await dig(p.port, "www.bing.com", "A", ["+tcp"]);
    expect(f.data).toEqual(["1.1.1.1"]);
    expect(up.received.tcp).toBe(before + 1); // forwarded over the query's protocol
  });

  test("headless entry larger than 512 bytes: truncated with TC over UDP, whole over TCP and EDNS", async () => {
    const u = await dig(p.port, "headless", "A", ["+noedns", "+ignore"]);
    expect(u.flags).toContain("tc");
    expect(u.size).toBeLessThanOrEqual(512);
    // compressed owner names: (512 - 12 - question) / 16 bytes per record
    expect(u.answers.length).toBe(Math.floor((512 - 12 - 14) / 16));
    const t = await dig(p.port, "headless", "A", ["+tcp"]);
    expect(t.answers.length).toBe(100);
    const e = await dig(p.port, "headless", "A", ["+bufsize=4096"]);
    expect(e.answers.length).toBe(100);
    expect(e.flags).not.toContain("tc");
  });

  test("metrics count requests and forwards", async () => {
    const req = await metric(p.registry, "istio_agent_dns_requests_total");
    const fwd = await metric(p.registry, "istio_agent_dns_upstream_requests_total");
    await dig(p.port, "productpage");
    await dig(p.port, "www.bing.com");
    expect(await metric(p.registry, "istio_agent_dns_requests_total")).toBe(req + 2);
    expect(await metric(p.registry, "istio_agent_dns_upstream_requests_total")).toBe(fwd + 1);
    const text = await p.registry.metrics();
    expect(text).toContain('istio_agent_dns_upstream_request_duration_seconds_bucket{le="0.001"}');
  });
});

d("forwarding with dig", () => {
  test("forwarded names are answered by the upstream over UDP", async () => {
    const up = await startUpstream({ answers: { "www.bing.com": "1.1.1.1" } });
    const p = await startProxy({ upstreams: [{ host: up.host, port: up.port }] });
    try {
      const r = await dig(p.port, "www.bing.com");
      expect(r.status).toBe("NOERROR");
      expect(r.data).toEqual(["1.1.1.1"]);
      expect(r.flags).not.toContain("aa");
      expect(up.names).toContain("www.bing.com");
    } finally {
      p.stop();
      up.close();
    }
  });

  test("truncated upstream answers are relayed; dig retries over TCP and gets everything", async () => {
    const up = await startUpstream();
    const p = await startProxy({ upstreams: [{ host: up.host, port: up.port }] });
    try {
      const u = await dig(p.port, "giant", "A", ["+noedns", "+ignore"]);
      expect(u.flags).toContain("tc");
      const r = await dig(p.port, "giant", "A", ["+noedns"]);
      expect(r.protocol).toBe("TCP");
      expect(r.answers.length).toBe(64);
      // An upstream that ignores the client's size: the proxy truncates for it.
      const raw = await dig(p.port, "giant-raw", "A", ["+noedns", "+ignore"]);
      expect(raw.flags).toContain("tc");
      expect(raw.size).toBeLessThanOrEqual(512);
      expect(raw.answers.length).toBeGreaterThan(0);
      expect(raw.answers.length).toBeLessThan(64);
    } finally {
      p.stop();
      up.close();
    }
  });

  test("upstream down: SERVFAIL and the failure is counted", async () => {
    const mute = await startUpstream({ silent: true });
    const p = await startProxy({ upstreams: [{ host: mute.host, port: mute.port }], forwardTimeoutMs: 300 });
    try {
      const r = await dig(p.port, "www.bing.com");
      expect(r.status).toBe("SERVFAIL");
      const t = await dig(p.port, "www.bing.com", "A", ["+tcp"]);
      expect(t.status).toBe("SERVFAIL");
      expect(await metric(p.registry, "istio_agent_dns_upstream_failures_total")).toBe(2);
      // table names keep working while the upstream is down
      expect((await dig(p.port, "productpage")).data).toEqual(["9.9.9.9"]);
    } finally {
      p.stop();
      mute.close();
    }
  });

  test("nothing listening upstream: SERVFAIL", async () => {
    const gone = await startUpstream();
    gone.close();
    const p = await startProxy({ upstreams: [{ host: gone.host, port: gone.port }], forwardTimeoutMs: 300 });
    try {
      expect((await dig(p.port, "www.bing.com")).status).toBe("SERVFAIL");
      expect((await dig(p.port, "www.bing.com", "A", ["+tcp"])).status).toBe("SERVFAIL");
    } finally {
      p.stop();
    }
  });

  test("sequential: a mute upstream in the list is skipped after the timeout", async () => {
    const mute = await startUpstream({ silent: true });
    const live = await startUpstream({ answers: { "www.bing.com": "1.1.1.1" } });
    const ups = [mute, live].map((u) => ({ host: u.host, port: u.port }));
    // The list is shuffled per query; a random source near 1 keeps the order, so the mute
    // resolver is asked first every time and each query must move on after its timeout.
    const p = await startProxy({ upstreams: ups, forwardTimeoutMs: 200, random: () => 0.999 });
    try {
      for (let i = 0; i < 6; i++) expect((await dig(p.port, "www.bing.com")).data).toEqual(["1.1.1.1"]);
      expect(live.received.udp).toBe(6); // every query ends at the live one
      expect(mute.received.udp).toBe(6); // ... after being asked of the mute one first
    } finally {
      p.stop();
      mute.close();
      live.close();
    }
  });

  test("parallel: every upstream is asked at once and the first answer wins", async () => {
    const mute = await startUpstream({ silent: true });
    const live = await startUpstream({ host: "127.0.0.2", answers: { "www.bing.com": "1.1.1.1" } });
    const ups = [mute, live].map((u) => ({ host: u.host, port: u.port }));
    const p = await startProxy({ upstreams: ups, forwardParallel: true, forwardTimeoutMs: 10_000 });
    try {
      const started = performance.now();
      for (let i = 0; i < 3; i++) expect((await dig(p.port, "www.bing.com")).data).toEqual(["1.1.1.1"]);
      // not waiting for the mute resolver's 10 s timeout
      expect(performance.now() - started).toBeLessThan(8000);
      expect(mute.received.udp).toBe(3);
      expect(live.received.udp).toBe(3);
    } finally {
      p.stop();
      mute.close();
      live.close();
    }
  });
});

d("before the first table", () => {
  test("SERVFAIL for every name, readiness blocked; the first table clears it", async () => {
    const up = await startUpstream({ answers: { "www.bing.com": "1.1.1.1" } });
    const p = await startProxy({ upstreams: [{ host: up.host, port: up.port }] }, false);
    try {
      expect(p.readiness.isReady()).toBe(false);
      expect(p.readiness.describe()).toContain("dns table received");
      expect((await dig(p.port, "productpage")).status).toBe("SERVFAIL");
      expect((await dig(p.port, "www.bing.com")).status).toBe("SERVFAIL");
      expect(up.received.udp).toBe(0);
      expect(p.proxy.ndsz()).toBeUndefined();
      p.proxy.setTable(istioTestTable());
      expect(p.readiness.isReady()).toBe(true);
      expect((await dig(p.port, "productpage")).data).toEqual(["9.9.9.9"]);
      expect((await dig(p.port, "www.bing.com")).data).toEqual(["1.1.1.1"]);
    } finally {
      p.stop();
      up.close();
    }
  });

  test("respond-before-sync (`:53` as root) forwards instead", async () => {
    const up = await startUpstream({ answers: { "www.bing.com": "1.1.1.1" } });
    const p = await startProxy({ upstreams: [{ host: up.host, port: up.port }], respondBeforeSync: true }, false);
    try {
      expect((await dig(p.port, "www.bing.com")).data).toEqual(["1.1.1.1"]);
      expect((await dig(p.port, "productpage")).status).toBe("NXDOMAIN");
    } finally {
      p.stop();
      up.close();
    }
  });
});
