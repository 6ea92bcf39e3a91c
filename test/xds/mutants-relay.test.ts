// One StreamRelay in memory (no sockets): when the upstream stream opens, the once-only initial
// subscriptions and health replay, limits and malformed input, how either side ending maps to
// the status Envoy gets and to Istio's metrics, routing of responses, ACK/NACK of internal types
// with the last accepted version, backpressure in both directions and shutdown at a message
// boundary. Statuses, messages and log lines are literals. Found by mutation testing
// (npm run mutate -- xds-relay); relay.test.ts covers the same over real gRPC, more slowly.

import { describe, expect, test } from "bun:test";
import { grpcFrame } from "../../src/xds/grpcframe.ts";
import type { AgentRequest } from "../../src/xds/messages.ts";
import type { EcdsHook, EcdsResult } from "../../src/wasm/ecds.ts";
import { until } from "../sds/fake-clock.ts";
import {
  ADS_SERVICE,
  Code,
  DELTA_PATH,
  HEALTH_INFO_TYPE,
  LISTENER_TYPE,
  NAME_TABLE_TYPE,
  PROXY_CONFIG_TYPE,
  REFLECTION_PATHS,
  routeOf,
  SOTW_PATH,
  TYPE_PREFIX,
  WORKLOAD_TYPE,
} from "../../src/xds/types.ts";
import { CDS, hex, req, res, rig } from "./relay-rig.ts";

describe("relay: requests", () => {
  test("the upstream stream opens on the first complete request, once, and gets the request bytes as sent", () => {
    const r = rig();
    const f1 = grpcFrame(req(CDS));
    r.dh.onData(f1.subarray(0, 7));
    expect(r.opened).toEqual([]);
    r.dh.onData(f1.subarray(7));
    expect(r.opened).toEqual([{ path: SOTW_PATH, delta: false }]);
    const f2 = grpcFrame(req(CDS));
    r.dh.onData(f2);
    expect(r.opened).toHaveLength(1);
    expect(Buffer.concat(r.up)).toEqual(Buffer.concat([f1, f2]));
    expect(r.ev.filter((e) => e.startsWith("requests") || e.startsWith("recv-max") || e.startsWith("bytes-up"))).toEqual([
      "bytes-up 7",
      `recv-max ${f1.length - 5}`,
      `bytes-up ${f1.length - 7}`,
      "requests",
      `bytes-up ${f2.length}`,
      `recv-max ${f2.length - 5}`,
      "requests",
    ]);
  });

  test("the first Listener request is followed by the agent's subscriptions and the last health report, once", () => {
    const health: AgentRequest = { typeUrl: HEALTH_INFO_TYPE };
    const r = rig({ initial: [{ typeUrl: NAME_TABLE_TYPE }, { typeUrl: PROXY_CONFIG_TYPE }], health });
    r.relay.sendHealth(health); // before the initial requests: not sent
    r.dh.onData(grpcFrame(req(CDS)));
    expect(r.sent().map((s) => s.typeUrl)).toEqual([CDS]);
    r.dh.onData(grpcFrame(req(LISTENER_TYPE)));
    r.dh.onData(grpcFrame(req(LISTENER_TYPE)));
    expect(r.sent().map((s) => s.typeUrl)).toEqual([CDS, LISTENER_TYPE, NAME_TABLE_TYPE, PROXY_CONFIG_TYPE, HEALTH_INFO_TYPE, LISTENER_TYPE]);
    r.relay.sendHealth(health);
    expect(
      r
        .sent()
        .map((s) => s.typeUrl)
        .at(-1),
    ).toBe(HEALTH_INFO_TYPE);
    expect(r.sent()).toHaveLength(7);
  });

  test("no health report to replay: only the subscriptions follow the Listener request", () => {
    const r = rig({ initial: [{ typeUrl: NAME_TABLE_TYPE }] });
    r.dh.onData(grpcFrame(req(LISTENER_TYPE)));
    expect(r.sent().map((s) => s.typeUrl)).toEqual([LISTENER_TYPE, NAME_TABLE_TYPE]);
    expect(r.finished).toEqual([]);
  });

  test("a request over the limit ends the stream with RESOURCE_EXHAUSTED naming both sizes; one at the limit passes", () => {
    const at = req(CDS);
    const ok = rig({ maxRequestBytes: at.length });
    ok.dh.onData(grpcFrame(at));
    expect(ok.finished).toEqual([]);
    expect(ok.sent()).toHaveLength(1);
    const over = rig({ maxRequestBytes: at.length - 1 });
    over.dh.onData(grpcFrame(at));
    expect(over.finished).toEqual([{ code: 8, message: `request of ${at.length} bytes exceeds the limit of ${at.length - 1} (ISTIO_GPRC_MAXRECVMSGSIZE)` }]);
    expect(over.up).toEqual([]);
  });

  test("a compressed request ends the stream with INVALID_ARGUMENT, logged as a warning; later data is ignored", () => {
    for (const delta of [false, true]) {
      const r = rig({ delta });
      const f = grpcFrame(req(CDS, delta));
      f[0] = 1;
      r.dh.onData(f);
      const what = `malformed ${delta ? "DeltaDiscoveryRequest" : "DiscoveryRequest"} from Envoy: compressed request messages are not supported (grpc-encoding identity only)`;
      expect(r.finished).toEqual([{ code: 3, message: expect.stringContaining(what) as unknown as string }]);
      expect(r.lines()).toContain(`warn ${r.finished[0]!.message}`);
      r.dh.onData(grpcFrame(req(CDS, delta)));
      expect(r.up).toEqual([]);
      expect(r.ev.filter((e) => e.startsWith("bytes-up"))).toHaveLength(1);
    }
  });

  test("sendAgentRequest after the stream ended sends nothing", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.relay.close({ code: 0, message: "" });
    r.relay.sendAgentRequest({ typeUrl: HEALTH_INFO_TYPE });
    expect(r.sent()).toHaveLength(1);
  });
});

describe("relay: ends", () => {
  test("Envoy half-closing gives OK, Envoy going away CANCELLED; both cancel upstream and count as cancelled; only the first counts", () => {
    for (const [ended, status, line] of [
      [true, { code: 0, message: "" }, "info downstream closed its stream, closing upstream stream"],
      [false, { code: 1, message: "downstream went away" }, "info downstream went away, closing upstream stream"],
    ] as const) {
      const r = rig();
      r.dh.onData(grpcFrame(req(CDS)));
      r.dh.onClientGone(ended);
      r.dh.onClientGone(!ended);
      expect(r.finished).toEqual([status]);
      expect(r.ev.filter((e) => e.startsWith("envoy-terminations") || e === "up.close")).toEqual(['envoy-terminations {"type":"cancelled"}', "up.close"]);
      expect(r.lines()).toContain(line);
    }
  });

  test.each([
    [
      "OK between messages",
      { code: 0, message: "" },
      true,
      false,
      { code: 0, message: "" },
      "info upstream stream ended by istiod",
      'istiod-terminations {"type":"cancelled"}',
    ],
    [
      "OK in the middle of a message",
      { code: 0, message: "" },
      true,
      true,
      { code: 13, message: "istiod ended the stream in the middle of a message" },
      "warn upstream terminated: istiod ended the stream in the middle of a message (code 13)",
      'istiod-terminations {"type":"cancelled"}',
    ],
    [
      "CANCELLED without a message",
      { code: 1, message: "" },
      true,
      false,
      { code: 14, message: "istiod cancelled the stream" },
      "warn upstream terminated: istiod cancelled the stream (code 14)",
      'istiod-terminations {"type":"cancelled"}',
    ],
    [
      "CANCELLED with a message",
      { code: 1, message: "bye" },
      true,
      false,
      { code: 14, message: "bye" },
      "warn upstream terminated: bye (code 14)",
      'istiod-terminations {"type":"cancelled"}',
    ],
    [
      "a failed connection",
      { code: 14, message: "connect ECONNREFUSED" },
      false,
      false,
      { code: 14, message: "connect ECONNREFUSED" },
      "warn upstream connection failed: connect ECONNREFUSED (code 14)",
      "failures",
    ],
    [
      "an error",
      { code: 13, message: "boom" },
      true,
      false,
      { code: 13, message: "boom" },
      "warn upstream terminated: boom (code 13)",
      'istiod-terminations {"type":"error"}',
    ],
  ] as const)("istiod ending the stream: %s", (_n, status, established, midMessage, want, line, metric) => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    if (midMessage) r.up_().onData(grpcFrame(res(CDS, "n1")).subarray(0, 8));
    r.up_().onClose(status, established);
    r.up_().onClose({ code: 13, message: "again" }, true);
    expect(r.finished).toEqual([want]);
    expect(r.lines()).toContain(line);
    expect(r.ev.filter((e) => e.startsWith("failures") || e.startsWith("istiod-terminations"))).toEqual([metric]);
  });

  test("a compressed response from istiod ends the stream with INTERNAL, logged as an error", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const f = grpcFrame(res(CDS, "n1"));
    f[0] = 1;
    r.up_().onData(f);
    const msg = "malformed DiscoveryResponse from istiod: compressed response message (the agent asked for identity encoding)";
    expect(r.finished).toEqual([{ code: 13, message: expect.stringContaining(msg) as unknown as string }]);
    expect(r.lines()).toContain(`error ${r.finished[0]!.message}`);
    r.up_().onData(grpcFrame(res(CDS, "n2")));
    expect(r.down).toEqual([]);
  });

  test("connected: logged once per stream and reported", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onConnected();
    expect(r.ev).toContain("connected");
    expect(r.lines()).toContain("info connected to upstream XDS server: istiod:15012");
  });
});

describe("relay: responses", () => {
  test("Envoy types and Workload are forwarded byte for byte; other types are dropped with an error line", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const a = grpcFrame(res(CDS, "n1"));
    const dropped = grpcFrame(res("type.googleapis.com/foo.Bar", "n2"));
    const w = grpcFrame(res(WORKLOAD_TYPE, "n3"));
    r.up_().onData(Buffer.concat([a, dropped, w]));
    expect(hex(Buffer.concat(r.down))).toBe(hex(Buffer.concat([a, w])));
    expect(r.lines()).toContain('error dropping response of type "type.googleapis.com/foo.Bar": not an Envoy type, not handled by the agent');
    expect(r.ev.filter((e) => e === "responses")).toHaveLength(3);
    expect(r.ev.filter((e) => e.startsWith("bytes-down")).reduce((n, e) => n + Number(e.split(" ")[1]), 0)).toBe(a.length + w.length);
  });

  test("internal types: the handler gets the resource, the ACK carries version and nonce; a rejection NACKs with the last accepted version", () => {
    let reject = false;
    const got: string[] = [];
    const r = rig({
      handler: (b) => {
        if (reject) throw new Error("bad table");
        got.push(Buffer.from(b).toString());
      },
    });
    r.dh.onData(grpcFrame(req(CDS)));
    reject = true;
    r.up_().onData(grpcFrame(res(NAME_TABLE_TYPE, "n0", "v0")));
    reject = false;
    r.up_().onData(grpcFrame(res(NAME_TABLE_TYPE, "n1", "v1", [Buffer.from("table-1")])));
    reject = true;
    r.up_().onData(grpcFrame(res(NAME_TABLE_TYPE, "n2", "v2")));
    expect(got).toEqual(["table-1"]);
    expect(r.sent().slice(1)).toEqual([
      { typeUrl: NAME_TABLE_TYPE, version: "", nonce: "n0", error: "bad table" },
      { typeUrl: NAME_TABLE_TYPE, version: "v1", nonce: "n1" },
      { typeUrl: NAME_TABLE_TYPE, version: "v1", nonce: "n2", error: "bad table" },
    ]);
    expect(r.lines()).toContain(`warn rejecting ${NAME_TABLE_TYPE} version v2 (nonce n2): bad table`);
    expect(r.down).toEqual([]);
  });

  test("an internal response without resources is neither handled nor ACKed", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onData(grpcFrame(res(NAME_TABLE_TYPE, "n1", "v1", [])));
    const after = grpcFrame(res(CDS, "n2"));
    r.up_().onData(after); // sentinel: handled after the empty one
    expect(hex(Buffer.concat(r.down))).toBe(hex(after));
    expect(r.handled).toEqual([]);
    expect(r.sent()).toHaveLength(1);
  });
});

describe("relay: backpressure", () => {
  test("a full Envoy pauses istiod once; Envoy draining resumes it once", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.setDownWritable(false);
    r.up_().onData(grpcFrame(res(CDS, "n1")));
    r.up_().onData(grpcFrame(res(CDS, "n2")));
    expect(r.ev.filter((e) => e === "up.pause")).toHaveLength(1);
    r.dh.onDrain();
    r.dh.onDrain();
    expect(r.ev.filter((e) => e === "up.resume")).toHaveLength(1);
    r.up_().onData(grpcFrame(res(CDS, "n3")));
    expect(r.ev.filter((e) => e === "up.pause")).toHaveLength(2);
  });

  test("a full istiod pauses Envoy once; istiod draining resumes it once", () => {
    const r = rig();
    r.setUpWritable(false);
    r.dh.onData(grpcFrame(req(CDS)));
    r.dh.onData(grpcFrame(req(CDS)));
    expect(r.ev.filter((e) => e === "down.pause")).toHaveLength(1);
    r.up_().onDrain();
    r.up_().onDrain();
    expect(r.ev.filter((e) => e === "down.resume")).toHaveLength(1);
  });

  test("draining with nothing paused resumes nothing", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.dh.onDrain();
    r.up_().onDrain();
    expect(r.ev.filter((e) => e.endsWith("resume"))).toEqual([]);
  });
});

describe("relay: shutdown", () => {
  test("between messages: ends at once with the status given", async () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    await r.relay.shutdown({ code: 14, message: "agent shutting down" }, 60_000);
    expect(r.finished).toEqual([{ code: 14, message: "agent shutting down" }]);
    expect(r.ev).toContain("up.close");
  });

  test("inside a forwarded message: Envoy gets the rest of it, then the status", async () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const f = grpcFrame(res(CDS, "n1"));
    r.up_().onData(f.subarray(0, 10));
    const done = r.relay.shutdown({ code: 14, message: "bye" }, 60_000);
    expect(r.finished).toEqual([]);
    r.up_().onData(f.subarray(10));
    await done;
    expect(hex(Buffer.concat(r.down))).toBe(hex(f));
    expect(r.finished).toEqual([{ code: 14, message: "bye" }]);
  });

  test("inside a message that never completes: ends after maxWaitMs", async () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onData(grpcFrame(res(CDS, "n1")).subarray(0, 10));
    await r.relay.shutdown({ code: 14, message: "bye" }, 30);
    expect(r.finished).toEqual([{ code: 14, message: "bye" }]);
  });

  test("after the stream ended, shutdown and close change nothing", async () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.relay.close({ code: 0, message: "" });
    await r.relay.shutdown({ code: 14, message: "late" }, 10);
    r.relay.close({ code: 13, message: "later" });
    expect(r.finished).toEqual([{ code: 0, message: "" }]);
  });
});

describe("type URLs, paths and routes (types.ts)", () => {
  test("the names on the wire", () => {
    expect(TYPE_PREFIX).toBe("type.googleapis.com/");
    expect(LISTENER_TYPE).toBe("type.googleapis.com/envoy.config.listener.v3.Listener");
    expect(NAME_TABLE_TYPE).toBe("type.googleapis.com/istio.networking.nds.v1.NameTable");
    expect(PROXY_CONFIG_TYPE).toBe("type.googleapis.com/istio.mesh.v1alpha1.ProxyConfig");
    expect(HEALTH_INFO_TYPE).toBe("type.googleapis.com/istio.v1.HealthInformation");
    expect(WORKLOAD_TYPE).toBe("type.googleapis.com/istio.workload.Workload");
    expect(ADS_SERVICE).toBe("envoy.service.discovery.v3.AggregatedDiscoveryService");
    expect(SOTW_PATH).toBe("/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources");
    expect(DELTA_PATH).toBe("/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources");
    expect([...REFLECTION_PATHS].sort()).toEqual([
      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ]);
  });

  test("gRPC status codes (google.rpc.Code)", () => {
    expect(Code).toEqual({
      OK: 0,
      CANCELLED: 1,
      UNKNOWN: 2,
      INVALID_ARGUMENT: 3,
      DEADLINE_EXCEEDED: 4,
      RESOURCE_EXHAUSTED: 8,
      FAILED_PRECONDITION: 9,
      UNIMPLEMENTED: 12,
      INTERNAL: 13,
      UNAVAILABLE: 14,
      UNAUTHENTICATED: 16,
    });
  });

  test("routes: internal first, then Envoy's own types and Workload forwarded, the rest dropped", () => {
    const internal = new Set([NAME_TABLE_TYPE, "type.googleapis.com/envoy.config.cluster.v3.Cluster.internal"]);
    expect(routeOf(NAME_TABLE_TYPE, internal)).toBe("internal");
    expect(routeOf("type.googleapis.com/envoy.config.cluster.v3.Cluster.internal", internal)).toBe("internal");
    expect(routeOf("type.googleapis.com/envoy.config.route.v3.RouteConfiguration", internal)).toBe("forward");
    expect(routeOf(WORKLOAD_TYPE, internal)).toBe("forward");
    expect(routeOf("type.googleapis.com/istio.workload.Address", internal)).toBe("drop");
    expect(routeOf("type.googleapis.com/envoyx.Foo", internal)).toBe("drop");
    expect(routeOf("envoy.config.route.v3.RouteConfiguration", internal)).toBe("drop");
    expect(routeOf("", internal)).toBe("drop");
  });
});

describe("relay: ECDS goes through the hook", () => {
  const ECDS = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig";
  function hook() {
    const observed: string[] = [];
    const pending: ((r: EcdsResult | Error) => void)[] = [];
    const h: EcdsHook = {
      typeUrl: ECDS,
      observeRequest: (msg) => observed.push(Buffer.from(msg).toString("hex")),
      convert: () => new Promise<EcdsResult>((resolve, reject) => pending.push((r) => (r instanceof Error ? reject(r) : resolve(r)))),
    };
    return { h, observed, pending };
  }

  test("requests of the ECDS type are shown to the hook, others not", () => {
    const k = hook();
    const r = rig({ ecds: k.h });
    r.dh.onData(grpcFrame(req(CDS)));
    r.dh.onData(grpcFrame(req(ECDS)));
    expect(k.observed).toEqual([req(ECDS).toString("hex")]);
    expect(r.sent().map((x) => x.typeUrl)).toEqual([CDS, ECDS]);
  });

  test("an ECDS response is converted and goes to Envoy framed, never inside a message being forwarded", async () => {
    const k = hook();
    const r = rig({ ecds: k.h });
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onData(Buffer.concat([grpcFrame(res(ECDS, "e1")), grpcFrame(res(ECDS, "e2"))]));
    expect(k.pending).toHaveLength(2);
    const big = grpcFrame(res(CDS, "c1"));
    const head = big.subarray(0, big.length - 3); // type decided, forwarding under way
    r.up_().onData(head);
    expect(hex(Buffer.concat(r.down))).toBe(hex(head));
    k.pending[0]!({ kind: "forward", message: Buffer.from("converted") });
    k.pending[1]!(new Error("sentinel"));
    // Conversions settle in order: once the second is logged, the first was handled.
    await until(() => r.lines().includes("error ECDS conversion failed: sentinel"), "conversions settled");
    expect(hex(Buffer.concat(r.down))).toBe(hex(head));
    r.up_().onData(big.subarray(big.length - 3));
    expect(hex(Buffer.concat(r.down))).toBe(hex(Buffer.concat([big, grpcFrame(Buffer.from("converted"))])));
  });

  test("a rejected ECDS response is NACKed upstream; a conversion failure is logged", async () => {
    const k = hook();
    const r = rig({ ecds: k.h });
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onData(grpcFrame(res(ECDS, "e1")));
    r.up_().onData(grpcFrame(res(ECDS, "e2")));
    k.pending[0]!({ kind: "nack", request: { typeUrl: ECDS, versionInfo: "v0", nonce: "e1", error: { code: 13, message: "bad wasm" } } });
    k.pending[1]!(new Error("fetch failed"));
    await until(() => r.lines().includes("error ECDS conversion failed: fetch failed"), "failure logged");
    expect(r.sent().slice(1)).toEqual([{ typeUrl: ECDS, version: "v0", nonce: "e1", error: "bad wasm" }]);
    expect(r.down).toEqual([]);
  });

  test("a conversion finishing after the stream ended writes nothing", async () => {
    const k = hook();
    const r = rig({ ecds: k.h });
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onData(grpcFrame(res(ECDS, "e1")));
    r.up_().onData(grpcFrame(res(ECDS, "e2")));
    r.relay.close({ code: 0, message: "" });
    k.pending[0]!({ kind: "forward", message: Buffer.from("late") });
    k.pending[1]!(new Error("sentinel"));
    await until(() => r.lines().includes("error ECDS conversion failed: sentinel"), "later conversion settled");
    expect(r.down).toEqual([]);
  });
});
