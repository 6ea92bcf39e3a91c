// statsd address by host name: Istio resolves statsdUdpAddress to an IP before rendering the
// bootstrap (Envoy's statsd sink rejects a host name); a failed lookup turns the sink off with a
// warning naming the input. Expected addresses are literals (Go's ResolveAddr: first IPv4 wins,
// else the last address; IPv6 bracketed; IPv4-mapped unwrapped).

import { afterEach, describe, expect, test } from "bun:test";
import { resolveAddr, resolveStatsdAddress, splitHostPort, type IpLookup } from "../../src/config/statsd.ts";
import { sandbox, start, type Sandbox } from "../support/binary.ts";
import { freePort } from "../support/fake-envoy.ts";

const fake =
  (table: Record<string, { address: string; family: number }[]>): IpLookup =>
  async (host) => {
    const r = table[host];
    if (!r) throw new Error("getaddrinfo ENOTFOUND " + host);
    return r;
  };

describe("resolveAddr (Istio's network.ResolveAddr)", () => {
  const lookup = fake({
    "statsd.monitoring": [
      { address: "fd00::9", family: 6 },
      { address: "10.0.0.9", family: 4 },
      { address: "10.0.0.10", family: 4 },
    ],
    v6only: [
      { address: "fd00::1", family: 6 },
      { address: "fd00::2", family: 6 },
    ],
    mapped: [{ address: "::ffff:10.1.1.1", family: 6 }],
    empty: [],
  });
  const cases: [string, string, string][] = [
    ["first IPv4 wins", "statsd.monitoring:8125", "10.0.0.9:8125"],
    ["IPv6 only: the last address, bracketed", "v6only:8125", "[fd00::2]:8125"],
    ["IPv4-mapped IPv6 is unwrapped", "mapped:9125", "10.1.1.1:9125"],
  ];
  for (const [name, input, want] of cases) {
    test(name, async () => expect(await resolveAddr(input, lookup)).toEqual({ ok: true, address: want }));
  }

  test("failures name the host", async () => {
    expect(await resolveAddr("nowhere:8125", lookup)).toEqual({
      ok: false,
      error: "lookup failed for IP address: lookup nowhere: getaddrinfo ENOTFOUND nowhere",
    });
    expect(await resolveAddr("empty:8125", lookup)).toEqual({ ok: false, error: "lookup failed for IP address: lookup empty: no addresses" });
    expect(await resolveAddr("statsd", lookup)).toEqual({ ok: false, error: "address statsd: missing port in address" });
    expect(await resolveAddr("statsd:http", lookup)).toEqual({ ok: false, error: 'address statsd:http: invalid port "http"' });
  });

  test("a lookup that never answers times out", async () => {
    const hang: IpLookup = () => new Promise(() => {});
    expect(await resolveAddr("slow:8125", hang, 50)).toEqual({ ok: false, error: "lookup failed for IP address: lookup slow: no answer within 0.05s" });
  });

  test("splitHostPort as Go's", () => {
    expect(splitHostPort("[::1]:8125")).toEqual({ host: "::1", port: "8125" });
    expect(splitHostPort("a.b:1")).toEqual({ host: "a.b", port: "1" });
    expect(() => splitHostPort("::1:8125")).toThrow("too many colons");
  });

  test("resolveStatsdAddress: off with a warning naming statsdUdpAddress on failure", async () => {
    const r = await resolveStatsdAddress("nowhere:8125", lookup);
    expect(r.address).toBeUndefined();
    expect(r.line).toEqual({
      level: "warn",
      text: 'resolve StatsdUdpAddress failed: statsdUdpAddress "nowhere:8125": lookup failed for IP address: lookup nowhere: getaddrinfo ENOTFOUND nowhere; the statsd sink is off',
    });
  });
});

describe("statsd address by host name (compiled agent, system resolver)", () => {
  let box: Sandbox | undefined;
  afterEach(() => box?.cleanup());

  async function effectiveConfig(statsdUdpAddress: string): Promise<string> {
    box = sandbox("agent-statsd-");
    const statusPort = await freePort();
    const agent = start(box.bin, ["proxy", "sidecar"], {
      cwd: box.dir,
      env: {
        POD_NAME: "app-0",
        POD_NAMESPACE: "demo",
        INSTANCE_IP: "10.9.8.7",
        DISABLE_ENVOY: "true",
        CA_ROOT_CA: "SYSTEM",
        PROXY_CONFIG: JSON.stringify({ statusPort, discoveryAddress: "127.0.0.1:1", controlPlaneAuthPolicy: "NONE", statsdUdpAddress }),
      },
    });
    try {
      await agent.waitFor(/Effective config:[^]*?Proxy role/);
    } finally {
      agent.proc.kill("SIGKILL");
      await agent.proc.exited;
    }
    return agent.output();
  }

  test("localhost:8125 becomes 127.0.0.1:8125 in the effective config the bootstrap is rendered from", async () => {
    const out = await effectiveConfig("localhost:8125");
    expect(out).toContain("statsdUdpAddress localhost:8125 resolved to 127.0.0.1:8125");
    expect(out).toMatch(/statsdUdpAddress: 127\.0\.0\.1:8125/);
  }, 20_000);

  test("a name that does not resolve turns the sink off with a warning naming it", async () => {
    const out = await effectiveConfig("statsd.invalid:8125");
    expect(out).toMatch(
      /warn\t.*resolve StatsdUdpAddress failed: statsdUdpAddress "statsd\.invalid:8125": lookup failed for IP address: lookup statsd\.invalid: .*; the statsd sink is off/,
    );
    const effective = out.slice(out.indexOf("Effective config:"), out.indexOf("Proxy role"));
    expect(effective).not.toContain("statsdUdpAddress");
  }, 20_000);
});
