// Wire format and the query handler without sockets: replies decoded with dns-packet, truncation,
// rcodes, forwarding order and failures through a scripted transport.

import { describe, expect, test } from "bun:test";
import * as packet from "dns-packet";
import { buildAlternateHosts, proxyDomain } from "../../src/dns/althosts.ts";
import { Forwarder, type UpstreamTransport } from "../../src/dns/forwarder.ts";
import { DnsHandler } from "../../src/dns/handler.ts";
import { buildLookupTable } from "../../src/dns/lookup.ts";
import { dnsMetrics } from "../../src/dns/metrics.ts";
import { nameInfo } from "../../src/dns/nametable.ts";
import { DnsProxy } from "../../src/dns/proxy.ts";
import type { HostPort } from "../../src/dns/resolvconf.ts";
import { fitReply, parseQuery, replySizeLimit } from "../../src/dns/wire.ts";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { istioTestTable, ISTIO_TEST_SEARCH } from "./helpers.ts";

const PD = proxyDomain("ns1", "ns1.svc.cluster.local");

function query(name: string, type: packet.RecordType = "A", extra: Partial<packet.Packet> = {}): Buffer {
  return packet.encode({ type: "query", id: 4242, flags: packet.RECURSION_DESIRED, questions: [{ type, name, class: "IN" }], ...extra });
}

type Script = (up: HostPort, q: Uint8Array) => Promise<Uint8Array>;

function answerFrom(ip: string): Script {
  return async (_up, q) => {
    const d = packet.decode(Buffer.from(q));
    return packet.encode({
      type: "response",
      id: d.id,
      flags: 0,
      questions: d.questions,
      answers: [{ type: "A", name: d.questions![0]!.name, ttl: 5, data: ip }],
    });
  };
}

function harness(opts: { script?: Script; upstreams?: HostPort[]; parallel?: boolean; random?: () => number; table?: boolean } = {}) {
  const calls: string[] = [];
  const transport: UpstreamTransport = {
    exchange: (protocol, up, q) => {
      calls.push(`${protocol} ${up.host}`);
      return (opts.script ?? answerFrom("1.1.1.1"))(up, q);
    },
  };
  const registry = newRegistry();
  const metrics = dnsMetrics(registry);
  const forwarder = new Forwarder({
    upstreams: opts.upstreams ?? [{ host: "10.0.0.1", port: 53 }],
    parallel: opts.parallel ?? false,
    timeoutMs: 1000,
    transport,
    log: silentLogger(),
    random: opts.random,
  });
  const h = new DnsHandler({ forwarder, metrics, log: silentLogger(), respondBeforeSync: false, random: opts.random });
  if (opts.table !== false) h.table = buildLookupTable(buildAlternateHosts(istioTestTable(), PD).entries, ISTIO_TEST_SEARCH);
  const ask = async (bytes: Uint8Array, protocol: "udp" | "tcp" = "udp") => {
    const r = await h.handle(bytes, protocol);
    return r ? (packet.decode(Buffer.from(r)) as packet.DecodedPacket & { rcode: string }) : undefined;
  };
  return { h, ask, calls, metrics, registry };
}

describe("local answers on the wire", () => {
  test("header: id, QR, AA, RD copied, RA clear; question echoed; TTL 30; class IN", async () => {
    const { ask } = harness();
    const r = (await ask(query("Productpage.ns1")))!;
    expect(r.id).toBe(4242);
    expect(r.flag_qr && r.flag_aa && r.flag_rd).toBe(true);
    expect(r.flag_ra).toBe(false);
    expect(r.rcode).toBe("NOERROR");
    expect(r.questions).toEqual([{ name: "Productpage.ns1", type: "A", class: "IN" }]);
    expect(r.answers).toEqual([{ name: "Productpage.ns1", type: "A", ttl: 30, class: "IN", flush: false, data: "9.9.9.9" }]);
  });

  test("CNAME chain is compressed and decodes to Istio's records", async () => {
    const { ask } = harness();
    const r = (await ask(query("www.google.com.ns1.svc.cluster.local")))!;
    expect(r.answers!.map((a) => [a.name, a.type, (a as { data: string }).data])).toEqual([
      ["www.google.com.ns1.svc.cluster.local", "CNAME", "www.google.com"],
      ["www.google.com", "A", "1.1.1.1"],
    ]);
  });

  test("AAAA records", async () => {
    const { ask } = harness();
    const r = (await ask(query("dual.localhost", "AAAA")))!;
    expect(r.answers!.map((a) => (a as { data: string }).data)).toEqual(["2001:db8::ff00:42:8329"]);
  });

  test("truncation keeps what fits 512 bytes and sets TC; EDNS raises the limit", async () => {
    const { h } = harness();
    const big = nameInfo({ ips: Array.from({ length: 200 }, (_, i) => `10.1.${i >> 8}.${i & 255}`), registry: "External" });
    h.table = buildLookupTable(buildAlternateHosts({ table: { "big.example": big } }, PD).entries, []);
    const udp = h.handle(query("big.example"), "udp") as Uint8Array;
    expect(udp.length).toBeLessThanOrEqual(512);
    const d = packet.decode(Buffer.from(udp));
    expect(d.flag_tc).toBe(true);
    expect(d.answers!.length).toBe(Math.floor((512 - 12 - 17) / 16));
    const edns = packet.decode(
      Buffer.from(
        h.handle(query("big.example", "A", { additionals: [{ type: "OPT", name: ".", udpPayloadSize: 4096 } as packet.Answer] }), "udp") as Uint8Array,
      ),
    );
    expect(edns.answers!.length).toBe(200);
    expect(edns.flag_tc).toBe(false);
    expect(packet.decode(Buffer.from(h.handle(query("big.example"), "tcp") as Uint8Array)).answers!.length).toBe(200);
  });

  test("reply size limit", () => {
    const q = (p: Buffer) => (parseQuery(p) as { ok: true; query: Parameters<typeof replySizeLimit>[1] }).query;
    expect(replySizeLimit("udp", q(query("a")))).toBe(512);
    expect(replySizeLimit("udp", q(query("a", "A", { additionals: [{ type: "OPT", name: ".", udpPayloadSize: 100 } as packet.Answer] })))).toBe(512);
    expect(replySizeLimit("udp", q(query("a", "A", { additionals: [{ type: "OPT", name: ".", udpPayloadSize: 1232 } as packet.Answer] })))).toBe(1232);
    expect(replySizeLimit("tcp", q(query("a")))).toBe(65535);
  });
});

describe("rcodes and drops", () => {
  test("no question: SERVFAIL; other opcodes: NOTIMP; two questions: FORMERR", async () => {
    const { ask } = harness();
    expect((await ask(packet.encode({ type: "query", id: 1, questions: [] })))!.rcode).toBe("SERVFAIL");
    const notify = packet.encode({ type: "query", id: 1, flags: 4 << 11, questions: [{ type: "A", name: "x", class: "IN" }] });
    expect((await ask(notify))!.rcode).toBe("NOTIMP");
    const two = packet.encode({
      type: "query",
      id: 1,
      questions: [
        { type: "A", name: "x", class: "IN" },
        { type: "A", name: "y", class: "IN" },
      ],
    });
    expect((await ask(two))!.rcode).toBe("FORMERR");
  });

  test("before the first table: SERVFAIL without asking upstream", async () => {
    const { ask, calls } = harness({ table: false });
    expect((await ask(query("www.bing.com")))!.rcode).toBe("SERVFAIL");
    expect(calls).toEqual([]);
  });

  test("malformed packets and responses are dropped and counted", async () => {
    const { h, metrics } = harness();
    expect(h.handle(new Uint8Array([1, 2, 3]), "udp")).toBeUndefined();
    const resp = packet.encode({ type: "response", id: 1, questions: [{ type: "A", name: "x", class: "IN" }] });
    expect(h.handle(resp, "udp")).toBeUndefined();
    const cut = query("productpage").subarray(0, 20);
    expect(h.handle(cut, "udp")).toBeUndefined();
    const v = (await metrics.dropped.get()).values;
    expect(v.find((x) => x.labels.reason === "malformed")?.value).toBe(2);
    expect(v.find((x) => x.labels.reason === "response")?.value).toBe(1);
    expect((await metrics.requests.get()).values[0]?.value ?? 0).toBe(0);
  });
});

describe("forwarding", () => {
  const ups = [
    { host: "10.0.0.1", port: 53 },
    { host: "10.0.0.2", port: 53 },
    { host: "10.0.0.3", port: 53 },
  ];

  test("forwarded verbatim over the query's protocol; the reply relayed", async () => {
    let seen: Uint8Array | undefined;
    const { ask, calls } = harness({
      script: async (up, q) => {
        seen = q;
        return answerFrom("8.8.8.8")(up, q);
      },
    });
    const q = query("www.bing.com");
    const r = (await ask(q, "tcp"))!;
    expect(Buffer.from(seen!).equals(q)).toBe(true);
    expect(calls).toEqual(["tcp 10.0.0.1"]);
    expect(r.answers!.map((a) => (a as { data: string }).data)).toEqual(["8.8.8.8"]);
  });

  test("sequential over a shuffled copy: failures move on to the next", async () => {
    const { ask, calls, metrics } = harness({
      upstreams: ups,
      random: () => 0, // Fisher-Yates with 0: [1,2,3] -> [2,3,1]
      script: async (up, q) => {
        if (up.host !== "10.0.0.1") throw new Error("timeout");
        return answerFrom("1.1.1.1")(up, q);
      },
    });
    const r = (await ask(query("www.bing.com")))!;
    expect(r.rcode).toBe("NOERROR");
    expect(calls).toEqual(["udp 10.0.0.2", "udp 10.0.0.3", "udp 10.0.0.1"]);
    expect((await metrics.upstreamRequests.get()).values[0]!.value).toBe(1);
    expect((await metrics.upstreamFailures.get()).values[0]?.value ?? 0).toBe(0);
  });

  test("a reply with the wrong ID or not a response counts as a failure", async () => {
    let n = 0;
    const { ask } = harness({
      upstreams: ups.slice(0, 2),
      script: async (up, q) => {
        n++;
        const good = await answerFrom("1.1.1.1")(up, q);
        if (n === 1) {
          const bad = Buffer.from(good);
          bad[0]! ^= 0xff;
          return bad;
        }
        return good;
      },
    });
    expect((await ask(query("www.bing.com")))!.answers!.length).toBe(1);
    expect(n).toBe(2);
  });

  test("all fail: SERVFAIL and dns_upstream_failures_total", async () => {
    const { ask, metrics } = harness({
      upstreams: ups,
      script: async () => {
        throw new Error("refused");
      },
    });
    expect((await ask(query("www.bing.com")))!.rcode).toBe("SERVFAIL");
    expect((await metrics.upstreamFailures.get()).values[0]!.value).toBe(1);
    expect((await metrics.upstreamDuration.get()).values.find((v) => v.metricName?.endsWith("_count"))!.value).toBe(1);
  });

  test("no upstream at all: SERVFAIL", async () => {
    const { ask } = harness({ upstreams: [] });
    expect((await ask(query("www.bing.com")))!.rcode).toBe("SERVFAIL");
  });

  test("parallel: all asked, first success wins even if another fails first", async () => {
    const { ask, calls } = harness({
      upstreams: ups,
      parallel: true,
      script: async (up, q) => {
        if (up.host === "10.0.0.1") throw new Error("refused");
        if (up.host === "10.0.0.2") return new Promise(() => {}); // never answers
        return answerFrom("3.3.3.3")(up, q);
      },
    });
    const r = (await ask(query("www.bing.com")))!;
    expect(r.answers!.map((a) => (a as { data: string }).data)).toEqual(["3.3.3.3"]);
    expect(calls.sort()).toEqual(["udp 10.0.0.1", "udp 10.0.0.2", "udp 10.0.0.3"]);
  });

  test("oversized upstream reply is truncated for a UDP client", () => {
    const q = (parseQuery(query("giant")) as { ok: true; query: Parameters<typeof fitReply>[0] }).query;
    const answers = Array.from({ length: 64 }, (_, i) => ({ type: "A" as const, name: "giant", ttl: 5, data: `240.0.0.${i}` }));
    const big = packet.encode({ type: "response", id: 4242, questions: [{ type: "A", name: "giant", class: "IN" }], answers });
    const out = fitReply(q, big, 512);
    expect(out.length).toBeLessThanOrEqual(512);
    const d = packet.decode(Buffer.from(out));
    expect(d.flag_tc).toBe(true);
    expect(d.answers!.length).toBe(Math.floor((512 - 12 - 11) / 21));
    expect(fitReply(q, big, 65535)).toBe(big);
  });
});

describe("name table updates", () => {
  test("malformed NDS bytes throw and keep the previous table", () => {
    const p = new DnsProxy({
      listen: [],
      upstreams: [],
      search: [],
      proxyDomain: PD,
      respondBeforeSync: false,
      forwardParallel: false,
      forwardTimeoutMs: 100,
      log: silentLogger(),
      registry: newRegistry(),
    });
    expect(p.isReady()).toBe(false);
    expect(() => p.updateNameTable(new Uint8Array([0x0a, 0x7f, 0x00]))).toThrow(/NameTable/);
    expect(p.isReady()).toBe(false);
    p.setTable({ table: { a: nameInfo({ ips: ["1.1.1.1"], registry: "External" }) } });
    expect(() => p.updateNameTable(new Uint8Array([0x0a, 0x7f]))).toThrow();
    expect(Object.keys(p.ndsz()!.table!)).toEqual(["a", "a."]);
  });
});
