// Pure parts of the DNS proxy: alternate hosts (Istio's TestBuildAlternateHosts), the lookup
// table, IP text, resolv.conf and the listen plan, the NameTable codec, /debug/ndsz.

import { describe, expect, test } from "bun:test";
import { buildAlternateHosts, proxyDomain } from "../../src/dns/althosts.ts";
import { dnsProxyEnabled } from "../../src/dns/factory.ts";
import { formatIp, parseIp, splitIps } from "../../src/dns/ip.ts";
import { buildLookupTable, TYPE_A, TYPE_AAAA } from "../../src/dns/lookup.ts";
import { nameInfo, nameTableCodec } from "../../src/dns/nametable.ts";
import { ndszTable } from "../../src/dns/ndsz.ts";
import { bindAddresses, parseResolvConf, planDns, splitHostPort, upstreamServers } from "../../src/dns/resolvconf.ts";
import { istioTestTable, ISTIO_TEST_SEARCH } from "./helpers.ts";

const PD = proxyDomain("ns1", "ns1.svc.cluster.local");

describe("alternate hosts", () => {
  test("proxy domain drops a leading namespace label", () => {
    expect(PD).toEqual({ namespace: "ns1", domain: "svc.cluster.local", domainParts: ["svc", "cluster", "local"] });
    expect(proxyDomain("ns1", "cluster.local").domain).toBe("cluster.local");
  });

  // Istio's TestBuildAlternateHosts: keys of the debug table by prefix.
  const cases: [string, string[]][] = [
    ["www.google.com", ["www.google.com", "www.google.com."]],
    ["example", ["example.ns2.", "example.ns2.svc.", "example.localhost.", "example.ns2.svc.cluster.local.", "example.ns2.svc.cluster.local"]],
    ["details", ["details.ns2.svc.cluster.remote", "details.ns2.svc.cluster.remote."]],
    ["productpage", ["productpage.ns1.svc.cluster.local.", "productpage.", "productpage.ns1.svc.cluster.local", "productpage.ns1.", "productpage.ns1.svc."]],
    [
      "svc-with-alt",
      [
        "svc-with-alt.",
        "svc-with-alt.ns1.",
        "svc-with-alt.ns1.svc.",
        "svc-with-alt.ns1.svc.clusterset.local.",
        "svc-with-alt.ns1.svc.cluster.local.",
        "svc-with-alt.ns1.svc.cluster.local",
      ],
    ],
    ["*.wildcard", ["*.wildcard", "*.wildcard."]],
    ["example.localhost.", ["example.localhost."]],
  ];
  const keys = Object.keys(ndszTable(istioTestTable(), PD).table!);
  for (const [prefix, want] of cases) {
    test(`debug table names starting with ${prefix}`, () => {
      expect(keys.filter((k) => k.startsWith(prefix)).sort()).toEqual([...want].sort());
    });
  }

  test("ndsz: generated hosts carry canonical IPs as Kubernetes entries; originals as sent", () => {
    const t = ndszTable(istioTestTable(), PD).table!;
    expect(t["productpage."]).toEqual({ ips: ["9.9.9.9"], registry: "Kubernetes" });
    expect(t["dual.localhost."]).toEqual({ ips: ["2.2.2.2", "2001:db8::ff00:42:8329"], registry: "Kubernetes" });
    expect(t["productpage.ns1.svc.cluster.local"]).toEqual({ ips: ["9.9.9.9"], registry: "Kubernetes", shortname: "productpage", namespace: "ns1" });
    expect(t["www.google.com"]).toEqual({ ips: ["1.1.1.1"], registry: "External" });
  });

  test("entries without a valid IP are skipped", () => {
    const r = buildAlternateHosts({ table: { "a.b": nameInfo({ ips: ["nope", "1.2.3"], registry: "External" }) } }, PD);
    expect(r.entries).toEqual([]);
    expect(r.skipped).toEqual(["a.b"]);
  });
});

describe("lookup table", () => {
  const table = buildLookupTable(buildAlternateHosts(istioTestTable(), PD).entries, ISTIO_TEST_SEARCH);
  const ips = (r: ReturnType<typeof table.lookup>) => r?.addresses.map((b) => formatIp({ family: b.length === 4 ? 4 : 6, bytes: b }));

  test.each([
    ["www.google.com.", TYPE_A, ["1.1.1.1"], undefined],
    ["www.google.com.ns1.svc.cluster.local.", TYPE_A, ["1.1.1.1"], "www.google.com."],
    ["productpage.", TYPE_A, ["9.9.9.9"], undefined],
    ["productpage.ns1.ns1.svc.cluster.local.", TYPE_A, ["9.9.9.9"], "productpage.ns1."],
    ["productpage.ns1.ns1.svc.cluster.local.", TYPE_AAAA, [], undefined],
    ["dual.localhost.", TYPE_AAAA, ["2001:db8::ff00:42:8329"], undefined],
    ["ipv6.localhost.", TYPE_A, [], undefined],
    ["foo.wildcard.", TYPE_A, ["10.10.10.10"], undefined],
    ["a.b.wildcard.", TYPE_A, ["11.11.11.11"], undefined],
    ["foo.wildcard.ns1.svc.cluster.local.", TYPE_A, ["10.10.10.10"], "*.wildcard."],
    ["foo.svc.mesh.company.net.ns1.svc.cluster.local.", TYPE_A, ["10.1.2.3"], "*.svc.mesh.company.net."],
  ] as const)("%s type %d", (name, qtype, want, cname) => {
    const r = table.lookup(qtype, name);
    expect(r).toBeDefined();
    expect(ips(r)).toEqual([...want]);
    expect(r!.cname).toBe(cname);
  });

  test.each([["www.bing.com."], ["example."], ["details.ns2."], ["productpage.ns1.svc.cluster.local.ns1.svc.cluster.local."], ["wildcard."], ["."]])(
    "%s is not ours",
    (name) => expect(table.lookup(TYPE_A, name)).toBeUndefined(),
  );

  test("types other than A and AAAA are never answered locally", () => {
    expect(table.lookup(15, "productpage.")).toBeUndefined();
    expect(table.lookup(16, "www.google.com.")).toBeUndefined();
  });

  test("a search-expanded alias never shadows a real name", () => {
    const t = buildLookupTable(
      buildAlternateHosts(
        {
          table: {
            foo: nameInfo({ ips: ["1.1.1.1"], registry: "External" }),
            "foo.ns1.svc.cluster.local": nameInfo({ ips: ["2.2.2.2"], registry: "Kubernetes", shortname: "foo", namespace: "ns1" }),
          },
        },
        PD,
      ).entries,
      ISTIO_TEST_SEARCH,
    );
    expect(t.lookup(TYPE_A, "foo.ns1.svc.cluster.local.")?.cname).toBeUndefined();
    expect(ips(t.lookup(TYPE_A, "foo.ns1.svc.cluster.local."))).toEqual(["2.2.2.2"]);
  });

  test("no search list: no aliases", () => {
    const t = buildLookupTable(buildAlternateHosts(istioTestTable(), PD).entries, []);
    expect(t.lookup(TYPE_A, "www.google.com.ns1.svc.cluster.local.")).toBeUndefined();
  });
});

describe("IP text", () => {
  test.each([
    ["1.2.3.4", "1.2.3.4"],
    ["2001:db8:0:0:0:ff00:42:8329", "2001:db8::ff00:42:8329"],
    ["::1", "::1"],
    ["::", "::"],
    ["2001:db8::1:0:0:1", "2001:db8::1:0:0:1"],
    ["2001:0:0:1:0:0:0:1", "2001:0:0:1::1"],
    ["::ffff:1.2.3.4", "::ffff:1.2.3.4"],
    ["fe80::1%eth0", "fe80::1"],
    ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
  ])("%s -> %s", (input, want) => expect(formatIp(parseIp(input)!)).toBe(want));

  test.each([["01.2.3.4"], ["1.2.3"], ["256.1.1.1"], ["1:2:3:4:5:6:7:8:9"], ["1::2::3"], ["x"], [""], ["1.2.3.4%eth0"], ["12345::"]])(
    "%s is not an IP",
    (input) => expect(parseIp(input)).toBeUndefined(),
  );

  test("mapped IPv4 counts as IPv6, as netip.Addr.Is6", () => {
    const r = splitIps(["1.1.1.1", "::ffff:1.1.1.1", "bad"]);
    expect(r.v4.length).toBe(1);
    expect(r.v6.length).toBe(1);
    expect(r.invalid).toEqual(["bad"]);
  });
});

describe("resolv.conf and listen plan", () => {
  test("parse nameservers and search like miekg/dns", () => {
    const rc = parseResolvConf("# c\n; c\nnameserver 10.96.0.10\nnameserver fd00::10\nsearch a.svc.cluster.local svc.cluster.local\noptions ndots:5\n");
    expect(rc).toEqual({ servers: ["10.96.0.10", "fd00::10"], search: ["a.svc.cluster.local", "svc.cluster.local"] });
    expect(parseResolvConf("search x y\ndomain z\n").search).toEqual(["z"]);
  });

  test("upstreams: IP nameservers at port 53 (or the injected port)", () => {
    expect(upstreamServers(["10.0.0.1", "dns.example", "::1"])).toEqual({
      upstreams: [
        { host: "10.0.0.1", port: 53 },
        { host: "::1", port: 53 },
      ],
      ignored: ["dns.example"],
    });
    expect(upstreamServers(["127.0.0.1"], 5353).upstreams).toEqual([{ host: "127.0.0.1", port: 5353 }]);
  });

  test("localhost binds by the nameserver families", () => {
    expect(bindAddresses("localhost:15053", ["10.0.0.1"])).toEqual([{ host: "127.0.0.1", port: 15053 }]);
    expect(bindAddresses("localhost:15053", ["fd00::1"])).toEqual([{ host: "::1", port: 15053 }]);
    expect(bindAddresses("localhost:15053", ["10.0.0.1", "fd00::1"])).toEqual([
      { host: "127.0.0.1", port: 15053 },
      { host: "::1", port: 15053 },
    ]);
    expect(bindAddresses("localhost:15053", [])).toEqual([{ host: "localhost", port: 15053 }]);
    expect(bindAddresses("[::1]:53", ["10.0.0.1"])).toEqual([{ host: "::1", port: 53 }]);
    expect(bindAddresses(":53", [])).toEqual([{ host: "0.0.0.0", port: 53 }]);
  });

  test("bad addresses name the variable", () => {
    for (const bad of ["localhost", "a:b:c", "host:99999", "[::1]53"]) expect(() => splitHostPort(bad)).toThrow(/DNS_PROXY_ADDR/);
  });

  test("`:53` as root answers before sync and prefers /var/lib/istio/resolv.conf", () => {
    expect(planDns({ addr: "localhost:53", uid: 0, alternateResolvConfExists: true })).toEqual({
      addr: "localhost:53",
      resolvConfPath: "/var/lib/istio/resolv.conf",
      respondBeforeSync: true,
      warning: undefined,
    });
    expect(planDns({ addr: "localhost:53", uid: 0, alternateResolvConfExists: false }).resolvConfPath).toBe("/etc/resolv.conf");
  });

  test("`:53` without root falls back to localhost:15053 with an error", () => {
    const p = planDns({ addr: ":53", uid: 1337, alternateResolvConfExists: true });
    expect(p.addr).toBe("localhost:15053");
    expect(p.respondBeforeSync).toBe(false);
    expect(p.resolvConfPath).toBe("/etc/resolv.conf");
    expect(p.warning).toContain("needs root");
  });

  test("default address", () => {
    expect(planDns({ addr: "", uid: 1337, alternateResolvConfExists: false }).addr).toBe("localhost:15053");
    expect(planDns({ addr: "localhost:5353", uid: 0, alternateResolvConfExists: true }).respondBeforeSync).toBe(false);
  });
});

describe("enablement", () => {
  const cfg = (capture: boolean, server: boolean, proxyType: "sidecar" | "router") =>
    ({ proxyType, env: { ISTIO_META_DNS_CAPTURE: capture, ISTIO_META_ENABLE_DNS_SERVER: server } }) as unknown as Parameters<typeof dnsProxyEnabled>[0];
  test.each([
    [true, false, "sidecar", true],
    [true, false, "router", false],
    [false, true, "router", true],
    [false, false, "sidecar", false],
  ] as const)("capture=%p server=%p %s -> %p", (c, s, t, want) => expect(dnsProxyEnabled(cfg(c, s, t))).toBe(want));
});

describe("NameTable codec", () => {
  const codec = nameTableCodec();
  test("round trip, with defaults filled", () => {
    const t = istioTestTable();
    const back = codec.decode(codec.encode(t));
    expect(back).toEqual(t);
  });

  test("wire field numbers match istio.networking.nds.v1.NameTable", () => {
    // table = 1 (map entry: key 1, value 2); NameInfo: ips 1, registry 2, shortname 3, namespace 4, alt_hosts 5
    const bytes = codec.encode({ table: { h: nameInfo({ ips: ["1.2.3.4"], registry: "R", shortname: "s", namespace: "n", altHosts: ["a"] }) } });
    expect(Buffer.from(bytes).toString("hex")).toBe("0a" + "1a" + "0a0168" + "1215" + "0a07312e322e332e34" + "120152" + "1a0173" + "22016e" + "2a0161");
  });

  test("malformed bytes throw a DnsError naming the type", () => {
    expect(() => codec.decode(new Uint8Array([0x0a, 0x05, 0x01]))).toThrow(/NameTable/);
    expect(() => codec.decode(new Uint8Array([0xff, 0xff, 0xff, 0xff]))).toThrow();
  });

  test("a host name longer than its bytes is an error even from a Buffer (protobufjs would clamp it)", () => {
    // table entry of 5 bytes whose key claims 127 bytes and has 3: from a Buffer, protobufjs' own
    // reader returns the key "abc" instead of failing.
    const cut = Buffer.from([0x0a, 0x05, 0x0a, 0x7f, 0x61, 0x62, 0x63]);
    expect(() => codec.decode(cut)).toThrow(/NameTable/);
  });
});
