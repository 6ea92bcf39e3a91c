import { afterEach, describe, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { CDS, LDS, TYPES, metricValue, startHarness, harnessScope } from "./harness.ts";
import { HEALTH_INFO_TYPE, NAME_TABLE_TYPE, PROXY_CONFIG_TYPE, WORKLOAD_TYPE } from "../../src/xds/types.ts";

const scope = harnessScope(afterEach);
const client = (delta = false) => scope.client(delta);
const listener = (name: string) => ({ typeUrl: LDS, value: Buffer.from(`listener-${name}`) });

describe("xds proxy: SotW", () => {
  test("basic flow: requests and responses pass through as the same bytes, with metadata upstream", async () => {
    scope.h = await startHarness({ env: { XDS_HEADER_X_EXTRA: "v1" } });
    expect(scope.h.readiness.warnings().map((b) => b.name)).toContain("xds connected");
    expect(scope.h.readiness.isReady()).toBe(true); // Istio does not gate readiness on the upstream stream
    const envoy = client();
    const sent = envoy.send({ typeUrl: LDS, resourceNames: ["a"], node: Buffer.from([0x0a, 0x01, 0x78]) });
    const up = await scope.h.istiod.nextStream();
    const req = await up.nextRequest((r) => r.typeUrl === LDS);
    expect(req.raw.equals(sent)).toBe(true);
    expect(up.metadata["authorization"]).toBe("Bearer test-token");
    expect(up.metadata["clusterid"]).toBe("Kubernetes");
    expect(up.metadata["x_extra"]).toBe("v1");
    const resp = up.encode({ typeUrl: LDS, versionInfo: "v1", nonce: "n1", resources: [listener("a"), listener("b")] });
    up.sendRaw(resp);
    const [got] = await envoy.waitFor(1);
    expect(got!.equals(resp)).toBe(true);
    expect(scope.h.readiness.isReady()).toBe(true);
    expect(await metricValue(scope.h.registry, "istio_agent_xds_proxy_requests")).toBeGreaterThanOrEqual(1);
    expect(await metricValue(scope.h.registry, "istio_agent_xds_proxy_responses")).toBe(1);
    expect(await metricValue(scope.h.registry, "istio_agent_xds_proxy_bytes", { direction: "downstream" })).toBe(resp.length + 5);
  });

  test("first Listener request subscribes NDS and PCDS; internal types are consumed and ACKed/NACKed", async () => {
    scope.h = await startHarness({ env: { PROXY_CONFIG_XDS_AGENT: "true" } });
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest((r) => r.typeUrl === CDS);
    expect(up.requests.some((r) => r.typeUrl === NAME_TABLE_TYPE)).toBe(false);
    envoy.send({ typeUrl: LDS });
    await up.nextRequest((r) => r.typeUrl === NAME_TABLE_TYPE);
    await up.nextRequest((r) => r.typeUrl === PROXY_CONFIG_TYPE);
    envoy.send({ typeUrl: LDS, versionInfo: "x" });
    // A second subscription would follow the "x" request upstream: wait for a later request
    // (the sentinel) before asserting there was none.
    envoy.send({ typeUrl: CDS, versionInfo: "sentinel" });
    await up.nextRequest((r) => r.typeUrl === CDS && r.versionInfo === "sentinel");
    expect(up.requests.filter((r) => r.typeUrl === NAME_TABLE_TYPE).length).toBe(1);
    expect(up.requests.filter((r) => r.typeUrl === PROXY_CONFIG_TYPE).length).toBe(1);

    up.send({ typeUrl: NAME_TABLE_TYPE, versionInfo: "7", nonce: "nt1", resources: [{ typeUrl: NAME_TABLE_TYPE, value: Buffer.from("table-1") }] });
    const ack = await up.nextRequest((r) => r.typeUrl === NAME_TABLE_TYPE && r.responseNonce === "nt1");
    expect(ack.versionInfo).toBe("7");
    expect(ack.errorDetail).toBeUndefined();
    expect(Buffer.from(scope.h.sinks.tables[0]!).toString()).toBe("table-1");

    scope.h.sinks.rejectNext = true;
    up.send({ typeUrl: NAME_TABLE_TYPE, versionInfo: "8", nonce: "nt2", resources: [{ typeUrl: NAME_TABLE_TYPE, value: Buffer.from("table-2") }] });
    const nack = await up.nextRequest((r) => r.typeUrl === NAME_TABLE_TYPE && r.responseNonce === "nt2");
    expect(nack.errorDetail?.code).toBe(13);
    expect(nack.errorDetail?.message).toContain("bad name table");
    expect(nack.versionInfo).toBe("7");

    // ProxyConfig: ca_certificates_pem is field 34 (repeated string)
    const pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const pc = Buffer.concat([Buffer.from([0x92, 0x02, pem.length]), Buffer.from(pem)]);
    up.send({ typeUrl: PROXY_CONFIG_TYPE, versionInfo: "p1", nonce: "pc1", resources: [{ typeUrl: PROXY_CONFIG_TYPE, value: pc }] });
    await up.nextRequest((r) => r.typeUrl === PROXY_CONFIG_TYPE && r.responseNonce === "pc1");
    expect(scope.h.sinks.bundles).toEqual([[pem]]);

    // Nothing internal reached Envoy; a following Envoy type still does.
    up.send({ typeUrl: LDS, resources: [listener("z")] });
    const got = await envoy.waitFor(1);
    expect(got.length).toBe(1);
    expect(TYPES.Res.decode(got[0]!).toJSON().typeUrl).toBe(LDS);
  });

  test("forward filter: Envoy types and Workload pass, anything else is dropped with a log line", async () => {
    scope.h = await startHarness();
    const envoy = client();
    envoy.send({ typeUrl: LDS });
    const up = await scope.h.istiod.nextStream();
    up.send({ typeUrl: "type.googleapis.com/some.other.Type", resources: [{ typeUrl: "type.googleapis.com/some.other.Type", value: Buffer.from("x") }] });
    up.send({ typeUrl: WORKLOAD_TYPE, resources: [{ typeUrl: WORKLOAD_TYPE, value: Buffer.from("w") }] });
    up.send({ typeUrl: CDS, resources: [] });
    const got = await envoy.waitFor(2);
    expect(got.map((b) => TYPES.Res.decode(b).toJSON().typeUrl)).toEqual([WORKLOAD_TYPE, CDS]);
    expect(scope.h.lines.some((l) => l.includes('dropping response of type "type.googleapis.com/some.other.Type"'))).toBe(true);
  });

  test("health reports: cached, replayed after the first Listener request, unhealthy carries error_detail", async () => {
    scope.h = await startHarness({ dns: false });
    scope.h.proxy.reportHealth("probe failed");
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest((r) => r.typeUrl === CDS);
    expect(up.requests.some((r) => r.typeUrl === HEALTH_INFO_TYPE)).toBe(false);
    envoy.send({ typeUrl: LDS });
    const unhealthy = await up.nextRequest((r) => r.typeUrl === HEALTH_INFO_TYPE);
    expect(unhealthy.errorDetail?.message).toBe("probe failed");
    expect(up.requests.some((r) => r.typeUrl === NAME_TABLE_TYPE)).toBe(false);
    scope.h.proxy.reportHealth(undefined);
    const n = up.requests.length;
    const healthy = await up.nextRequest((r) => r.typeUrl === HEALTH_INFO_TYPE, n);
    expect(healthy.errorDetail).toBeUndefined();
    // reconnect: the last (healthy) report is replayed on the new stream
    envoy.close();
    const envoy2 = client();
    envoy2.send({ typeUrl: LDS });
    const up2 = await scope.h.istiod.nextStream();
    const replay = await up2.nextRequest((r) => r.typeUrl === HEALTH_INFO_TYPE);
    expect(replay.errorDetail).toBeUndefined();
  });

  test("Envoy closes and reopens: the upstream stream ends and a fresh one is dialed", async () => {
    scope.h = await startHarness();
    const e1 = client();
    e1.send({ typeUrl: CDS });
    const up1 = await scope.h.istiod.nextStream();
    await up1.nextRequest();
    e1.close();
    await up1.closed;
    const e2 = client();
    e2.send({ typeUrl: CDS, versionInfo: "again" });
    const up2 = await scope.h.istiod.nextStream();
    expect((await up2.nextRequest()).versionInfo).toBe("again");
    up2.send({ typeUrl: CDS, resources: [] });
    await e2.waitFor(1);
    expect(await metricValue(scope.h.registry, "istio_agent_envoy_connection_terminations", { type: "cancelled" })).toBe(1);
  });

  test("multiple streams: a new downstream stream replaces the active one", async () => {
    scope.h = await startHarness();
    const e1 = client();
    e1.send({ typeUrl: CDS });
    const up1 = await scope.h.istiod.nextStream();
    await up1.nextRequest();
    const e2 = client();
    e2.send({ typeUrl: LDS });
    const up2 = await scope.h.istiod.nextStream();
    await up2.nextRequest();
    const s1 = await e1.status;
    expect(s1.code).toBe(grpc.status.CANCELLED);
    await up1.closed;
    up2.send({ typeUrl: LDS, resources: [listener("x")] });
    expect((await e2.waitFor(1)).length).toBe(1);
  });

  test("istiod closes the stream with an error: Envoy gets the same status", async () => {
    scope.h = await startHarness();
    const envoy = client();
    envoy.send({ typeUrl: CDS });
    const up = await scope.h.istiod.nextStream();
    await up.nextRequest();
    up.end(grpc.status.PERMISSION_DENIED, "no access for you");
    const s = await envoy.status;
    expect(s.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(s.details).toBe("no access for you");
    expect(await metricValue(scope.h.registry, "istio_agent_istiod_connection_terminations", { type: "error" })).toBe(1);
  });
});
