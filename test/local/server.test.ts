// The local xDS server over real gRPC (Unix socket), spoken to with requests encoded and
// responses decoded by the real Envoy protos: SotW and Delta sequences, versions and nonces,
// ACK/NACK/stale handling, pushes of only what changed, bad files rejected with the old set kept.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type protobuf from "protobufjs";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { createLocalXdsServer, type LocalXdsServer } from "../../src/local/index.ts";
import { CDS, EDS, fixtureYaml, LDS, RDS, SDS } from "./fixtures.ts";
import { decodeAs, envoyRoot, RawAds, tempDir, writeText } from "./support.ts";

let envoy: protobuf.Root;
const tmp = tempDir();
const file = join(tmp.dir, "xds.yaml");
const logs = memoryLogger("all:debug");
const registry = newRegistry();
const ac = new AbortController();
let server: LocalXdsServer;
const node = { id: "sidecar~10.0.0.1~test.default~default.svc.cluster.local" };

beforeAll(async () => {
  envoy = await envoyRoot();
  writeText(file, fixtureYaml());
  server = createLocalXdsServer({ path: file, listen: `unix://${join(tmp.dir, "sock", "xds.sock")}`, log: logs.log, registry, pollMs: 0 });
  await server.start(ac.signal);
  await server.loaded();
});

afterAll(async () => {
  ac.abort();
  await server.stopped();
  tmp.cleanup();
});

/** Rewrite the file and make the server pick it up now (the watcher may also; reloads are idempotent). */
async function edit(yaml: string) {
  writeText(file, yaml);
  return server.reload();
}

function req(o: Record<string, unknown>): Uint8Array {
  const T = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  return T.encode(T.fromObject({ node, ...o })).finish();
}

function deltaReq(o: Record<string, unknown>): Uint8Array {
  const T = envoy.lookupType("envoy.service.discovery.v3.DeltaDiscoveryRequest");
  return T.encode(T.fromObject({ node, ...o })).finish();
}

/** Decode a DiscoveryResponse and each resource Any with the real Envoy type it names. */
function sotw(b: Buffer) {
  const r = decodeAs(envoy, "envoy.service.discovery.v3.DiscoveryResponse", b);
  const resources = (r.resources ?? []).map((a: { type_url: string; value: Uint8Array }) => {
    expect(a.type_url).toBe(r.type_url);
    return decodeAs(envoy, a.type_url.split("/")[1]!, a.value);
  });
  return { version: r.version_info as string, nonce: r.nonce as string, typeUrl: r.type_url as string, resources };
}

function delta(b: Buffer) {
  const r = decodeAs(envoy, "envoy.service.discovery.v3.DeltaDiscoveryResponse", b);
  const resources = (r.resources ?? []).map((x: { name: string; version: string; resource: { type_url: string; value: Uint8Array } }) => ({
    name: x.name,
    version: x.version,
    body: decodeAs(envoy, x.resource.type_url.split("/")[1]!, x.resource.value),
  }));
  return {
    nonce: r.nonce as string,
    typeUrl: r.type_url as string,
    system: r.system_version_info as string,
    resources,
    removed: (r.removed_resources ?? []) as string[],
  };
}

describe("SotW", () => {
  test("sequence: wildcard LDS/CDS, named RDS/EDS/SDS, ACK, stale nonce, NACK, push of the changed type only", async () => {
    const ads = new RawAds(server.address(), "StreamAggregatedResources");
    try {
      // LDS wildcard: both listeners, decodable by Envoy's own Listener type, Any payloads intact.
      ads.send(req({ type_url: LDS }));
      const lds = sotw(await ads.next());
      expect(lds.typeUrl).toBe(LDS);
      expect(lds.version).toMatch(/^[0-9a-f]{12}$/);
      expect(lds.nonce).not.toBe("");
      expect(lds.resources.map((l: any) => l.name)).toEqual(["svc.test:80", "tcp-in"]);
      const api = lds.resources[0].api_listener.api_listener;
      expect(api.type_url).toBe("type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager");
      const hcm = decodeAs(envoy, api.type_url.split("/")[1], api.value);
      expect(hcm.rds).toEqual({ route_config_name: "svc-route", config_source: { ads: {}, resource_api_version: "V3" } });
      expect(hcm.http_filters[0].typed_config.type_url).toBe("type.googleapis.com/envoy.extensions.filters.http.router.v3.Router");
      expect(lds.resources[1].traffic_direction).toBe("INBOUND");
      const tcp = lds.resources[1].filter_chains[0].filters[0].typed_config;
      expect(decodeAs(envoy, tcp.type_url.split("/")[1], tcp.value)).toEqual({ stat_prefix: "in", cluster: "b" });

      // ACK: nothing more. A stale nonce: ignored.
      ads.send(req({ type_url: LDS, version_info: lds.version, response_nonce: lds.nonce }));
      ads.send(req({ type_url: LDS, version_info: lds.version, response_nonce: "not-a-nonce-we-sent" }));
      expect(await ads.quiet()).toBe(true);

      ads.send(req({ type_url: CDS }));
      const cds = sotw(await ads.next());
      expect(cds.resources.map((c: any) => c.name)).toEqual(["a", "b"]);
      const b = cds.resources[1];
      expect(b).toMatchObject({ type: "STATIC", connect_timeout: { seconds: 1 }, load_assignment: { cluster_name: "b" } });
      const tls = decodeAs(envoy, "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", b.transport_socket.typed_config.value);
      expect(tls).toEqual({ sni: "b.test", common_tls_context: { tls_certificate_sds_secret_configs: [{ name: "default", sds_config: { ads: {} } }] } });
      ads.send(req({ type_url: CDS, version_info: cds.version, response_nonce: cds.nonce }));

      // Named types: only what was asked for; unknown names are simply absent.
      ads.send(req({ type_url: RDS, resource_names: ["svc-route"] }));
      const rds = sotw(await ads.next());
      expect(rds.resources).toEqual([
        { name: "svc-route", virtual_hosts: [{ name: "all", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster: "a" } }] }] },
      ]);
      ads.send(req({ type_url: RDS, version_info: rds.version, response_nonce: rds.nonce, resource_names: ["svc-route"] }));

      ads.send(req({ type_url: EDS, resource_names: ["a", "missing"] }));
      const eds = sotw(await ads.next());
      expect(eds.resources.map((e: any) => e.cluster_name)).toEqual(["a"]);
      expect(eds.resources[0].endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({ address: "127.0.0.1", port_value: 8080 });

      ads.send(req({ type_url: SDS, resource_names: ["default"] }));
      const sds = sotw(await ads.next());
      expect(sds.resources[0].tls_certificate.private_key).toEqual({ filename: "/etc/certs/key.pem" });
      ads.send(req({ type_url: SDS, version_info: sds.version, response_nonce: sds.nonce, resource_names: ["default"] }));

      // NACK of EDS: logged and counted, nothing resent.
      ads.send(
        req({
          type_url: EDS,
          version_info: "",
          response_nonce: eds.nonce,
          resource_names: ["a", "missing"],
          error_detail: { code: 13, message: "bad endpoint" },
        }),
      );
      expect(await ads.quiet()).toBe(true);
      expect(logs.lines.some((l) => l.includes("rejected EDS version") && l.includes("bad endpoint"))).toBe(true);
      expect(await registry.getSingleMetricAsString("istio_agent_local_xds_nacks")).toContain('type="EDS"} 1');

      // Subscription change on ACK: answered with the new set.
      ads.send(req({ type_url: EDS, version_info: eds.version, response_nonce: eds.nonce, resource_names: ["missing"] }));
      const eds2 = sotw(await ads.next());
      expect(eds2.resources).toEqual([]);
      ads.send(req({ type_url: EDS, version_info: eds2.version, response_nonce: eds2.nonce, resource_names: ["a"] }));
      const eds3 = sotw(await ads.next());
      ads.send(req({ type_url: EDS, version_info: eds3.version, response_nonce: eds3.nonce, resource_names: ["a"] }));

      // Change only cluster b: one CDS response with the full set, new version; nothing else.
      const r = await edit(fixtureYaml({ bTimeout: "2.5s" }));
      expect(r.ok && r.changes.map((c) => c.typeUrl)).toEqual([CDS]);
      const cds2 = sotw(await ads.next());
      expect(cds2.typeUrl).toBe(CDS);
      expect(cds2.resources.map((c: any) => c.name)).toEqual(["a", "b"]);
      expect(cds2.resources[1].connect_timeout).toEqual({ seconds: 2, nanos: 500_000_000 });
      expect(cds2.version).not.toBe(cds.version);
      expect(cds2.nonce).not.toBe(cds.nonce);
      ads.send(req({ type_url: CDS, version_info: cds2.version, response_nonce: cds2.nonce }));
      expect(await ads.quiet()).toBe(true);

      // Change an endpoint: EDS only.
      await edit(fixtureYaml({ bTimeout: "2.5s", aPort: 9090 }));
      const eds4 = sotw(await ads.next());
      expect(eds4.typeUrl).toBe(EDS);
      expect(eds4.resources[0].endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value).toBe(9090);
      ads.send(req({ type_url: EDS, version_info: eds4.version, response_nonce: eds4.nonce, resource_names: ["a"] }));

      // A bad file: rejected with path and resource, nothing pushed, old set still served.
      const bad = await edit(fixtureYaml({ bTimeout: "3s", typo: true }));
      expect(bad.ok).toBe(false);
      if (!bad.ok)
        expect(bad.error.message).toBe(`${file}: clusters[1] "b": unknown field "lbPolicyy" in envoy.config.cluster.v3.Cluster (did you mean "lb_policy"?)`);
      expect(
        logs.lines.some((l) => l.includes(`local xDS: rejected ${file}: clusters[1] "b": unknown field "lbPolicyy"`) && l.includes("still serving version")),
      ).toBe(true);
      expect(await ads.quiet()).toBe(true);
      const fresh = new RawAds(server.address(), "StreamAggregatedResources");
      try {
        fresh.send(req({ type_url: CDS }));
        const again = sotw(await fresh.next());
        expect(again.version).toBe(cds2.version);
        expect(again.resources[1].connect_timeout).toEqual({ seconds: 2, nanos: 500_000_000 });
      } finally {
        fresh.close();
      }
      expect(await registry.getSingleMetricAsString("istio_agent_local_xds_reloads")).toContain('result="rejected"} 1');
    } finally {
      ads.close();
    }
  }, 20_000);
});

describe("Delta", () => {
  test("sequence: wildcard CDS, named EDS with does-not-exist, change and removal pushed as a difference", async () => {
    await edit(fixtureYaml());
    const ads = new RawAds(server.address(), "DeltaAggregatedResources");
    try {
      ads.send(deltaReq({ type_url: CDS }));
      const c1 = delta(await ads.next());
      expect(c1.typeUrl).toBe(CDS);
      expect(c1.resources.map((r: any) => r.name)).toEqual(["a", "b"]);
      expect(c1.resources[0].version).toMatch(/^[0-9a-f]{12}$/);
      expect(c1.resources[1].body.name).toBe("b");
      expect(c1.system).toBe(server.snapshot().version);
      ads.send(deltaReq({ type_url: CDS, response_nonce: c1.nonce }));
      expect(await ads.quiet()).toBe(true);

      ads.send(deltaReq({ type_url: EDS, resource_names_subscribe: ["a", "nope"] }));
      const e1 = delta(await ads.next());
      expect(e1.resources.map((r: any) => r.name)).toEqual(["a"]);
      expect(e1.removed).toEqual(["nope"]);
      ads.send(deltaReq({ type_url: EDS, response_nonce: e1.nonce }));

      // NACK: logged, nothing resent.
      ads.send(deltaReq({ type_url: EDS, response_nonce: e1.nonce, error_detail: { code: 13, message: "no thanks" } }));
      expect(await ads.quiet()).toBe(true);
      expect(logs.lines.some((l) => l.includes("rejected EDS (nonce") && l.includes("no thanks"))).toBe(true);

      // Change b, remove a (and its endpoints): CDS gets b + removed a; EDS gets removed a.
      await edit(fixtureYaml({ withA: false, bTimeout: "4s" }));
      const got = [delta(await ads.next()), delta(await ads.next())].sort((x, y) => (x.typeUrl < y.typeUrl ? -1 : 1));
      const [c2, e2] = got as [ReturnType<typeof delta>, ReturnType<typeof delta>];
      expect(c2.typeUrl).toBe(CDS);
      expect(c2.resources.map((r: any) => [r.name, r.body.connect_timeout])).toEqual([["b", { seconds: 4 }]]);
      expect(c2.removed).toEqual(["a"]);
      expect(e2.typeUrl).toBe(EDS);
      expect(e2.resources).toEqual([]);
      expect(e2.removed).toEqual(["a"]);
      expect(await ads.quiet()).toBe(true);

      // Re-adding a: pushed to both subscriptions.
      await edit(fixtureYaml({ bTimeout: "4s" }));
      const back = [delta(await ads.next()), delta(await ads.next())];
      expect(back.map((r) => [r.typeUrl, r.resources.map((x: any) => x.name), r.removed]).sort()).toEqual([
        [CDS, ["a"], []],
        [EDS, ["a"], []],
      ]);

      // Unsubscribe: later changes to a's endpoints are not sent.
      // (The subscription to a missing name answers "removed", which proves the server has
      // processed the unsubscribe before the file changes.)
      ads.send(deltaReq({ type_url: EDS, resource_names_unsubscribe: ["a", "nope"], resource_names_subscribe: ["sync"] }));
      expect(delta(await ads.next()).removed).toEqual(["sync"]);
      await edit(fixtureYaml({ bTimeout: "4s", aPort: 7070 }));
      expect(await ads.quiet()).toBe(true);
    } finally {
      ads.close();
    }
  }, 20_000);

  test("reconnect with initial_resource_versions: only what the client does not have", async () => {
    await edit(fixtureYaml());
    const first = new RawAds(server.address(), "DeltaAggregatedResources");
    let versions: Record<string, string>;
    try {
      first.send(deltaReq({ type_url: CDS }));
      const c = delta(await first.next());
      versions = Object.fromEntries(c.resources.map((r: any) => [r.name, r.version]));
    } finally {
      first.close();
    }
    const ads = new RawAds(server.address(), "DeltaAggregatedResources");
    try {
      ads.send(deltaReq({ type_url: CDS, initial_resource_versions: { a: versions.a, b: "stale", gone: "v1" } }));
      const c = delta(await ads.next());
      expect(c.resources.map((r: any) => r.name)).toEqual(["b"]);
      expect(c.removed).toEqual(["gone"]);
    } finally {
      ads.close();
    }
  }, 20_000);
});

test("types the file does not hold (NDS, PCDS) are not answered", async () => {
  const ads = new RawAds(server.address(), "StreamAggregatedResources");
  try {
    ads.send(req({ type_url: "type.googleapis.com/istio.networking.nds.v1.NameTable" }));
    expect(await ads.quiet()).toBe(true);
    ads.send(req({ type_url: LDS }));
    expect(sotw(await ads.next()).typeUrl).toBe(LDS);
  } finally {
    ads.close();
  }
});

test("a bad file at start: start still binds, readiness names the error, requests wait until it is fixed", async () => {
  const bad = join(tmp.dir, "bad.yaml");
  writeText(bad, "clusters:\n  - name: x\n    type: EDSS\n");
  const readiness = new Readiness();
  const log = memoryLogger("all:info");
  const s = createLocalXdsServer({ path: bad, listen: "127.0.0.1:0", log: log.log, readiness, pollMs: 0 });
  const ctl = new AbortController();
  await s.start(ctl.signal);
  const ads = new RawAds(s.address(), "StreamAggregatedResources");
  try {
    ads.send(req({ type_url: CDS }));
    const message = `${bad}: clusters[0] "x": type: invalid value "EDSS" for enum envoy.config.cluster.v3.Cluster.DiscoveryType`;
    for (let i = 0; i < 100 && !readiness.blockers()[0]?.lastError; i++) await Bun.sleep(20);
    expect(readiness.isReady()).toBe(false);
    expect(readiness.blockers()).toMatchObject([{ name: "local xDS file loaded", lastError: expect.stringContaining(message) }]);
    expect(log.lines.some((l) => l.includes(`local xDS: rejected ${message}`) && l.includes("nothing to serve until it is fixed"))).toBe(true);
    expect(await ads.quiet()).toBe(true); // the request waits rather than seeing an empty world

    writeText(bad, "clusters:\n  - name: x\n    type: EDS\n");
    expect((await s.reload()).ok).toBe(true);
    const cds = sotw(await ads.next());
    expect(cds.resources.map((c: any) => [c.name, c.type])).toEqual([["x", "EDS"]]);
    expect(readiness.isReady()).toBe(true);
  } finally {
    ads.close();
    ctl.abort();
    await s.stopped();
  }
});

test("listens on a loopback TCP port when asked", async () => {
  const s = createLocalXdsServer({ path: file, listen: "127.0.0.1:0", log: memoryLogger().log, pollMs: 0 });
  const ctl = new AbortController();
  await s.start(ctl.signal);
  try {
    expect(s.address()).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(s.address()).not.toBe("127.0.0.1:0");
    const ads = new RawAds(s.address(), "StreamAggregatedResources");
    ads.send(req({ type_url: CDS }));
    expect(sotw(await ads.next()).resources.length).toBeGreaterThan(0);
    ads.close();
  } finally {
    ctl.abort();
    await s.stopped();
  }
});

test("LOCAL_XDS_PATH naming a FIFO is refused at once, naming the file, instead of blocking", async () => {
  const fifo = join(tmp.dir, "fifo.yaml");
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  const log = memoryLogger("all:info");
  const s = createLocalXdsServer({ path: fifo, listen: "127.0.0.1:0", log: log.log, readiness: new Readiness(), pollMs: 0 });
  const ctl = new AbortController();
  await s.start(ctl.signal);
  try {
    const r = await s.reload();
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toBe(`${fifo}: cannot read: ${fifo}: is a FIFO, not a regular file`);
  } finally {
    ctl.abort();
    await s.stopped();
  }
});

test("a file that is missing at start, then appears empty, still clears the blocker", async () => {
  const later = join(tmp.dir, "later.yaml");
  const readiness = new Readiness();
  const log = memoryLogger("all:info");
  const s = createLocalXdsServer({ path: later, listen: "127.0.0.1:0", log: log.log, readiness, pollMs: 0 });
  const ctl = new AbortController();
  await s.start(ctl.signal);
  try {
    const missing = await s.reload();
    expect(missing.ok).toBe(false);
    if (!missing.ok) expect(missing.error.message).toBe(`${later}: cannot read: ENOENT`);
    expect(readiness.blockers()[0]?.lastError).toBe(`${later}: cannot read: ENOENT`);
    // Reported once, not on every retry.
    await s.reload();
    expect(log.lines.filter((l) => l.includes("cannot read: ENOENT")).length).toBe(1);
    writeText(later, "# nothing yet\n");
    expect((await s.reload()).ok).toBe(true);
    await s.loaded();
    expect(readiness.isReady()).toBe(true);
    expect(log.lines.some((l) => l.includes(`local xDS: serving ${later} (version`) && l.includes("0 listeners"))).toBe(true);
  } finally {
    ctl.abort();
    await s.stopped();
  }
});
