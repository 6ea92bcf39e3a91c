// One StreamRelay in memory for the relay's mutation tests (mutants-relay*.test.ts): a scripted
// downstream call (optionally with writev, as the HTTP/2 server call has), a scripted upstream
// (writability, and a hook run on each write), metrics recorded as events, the log as text or JSON.

import { LogSink, memoryLogger } from "../../src/lib/log.ts";
import { LogLimiter } from "../../src/lib/loglimit.ts";
import type { DownstreamCall } from "../../src/xds/downstream.ts";
import { xdsCodec, type AgentRequest } from "../../src/xds/messages.ts";
import type { XdsMetrics } from "../../src/xds/metrics.ts";
import { StreamRelay } from "../../src/xds/relay.ts";
import type { EcdsHook } from "../../src/wasm/ecds.ts";
import { DELTA_PATH, NAME_TABLE_TYPE, SOTW_PATH, type GrpcStatus } from "../../src/xds/types.ts";
import type { UpstreamHandlers } from "../../src/xds/upstream.ts";
import { TYPES } from "./harness.ts";

export const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
export const codec = xdsCodec();
export const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

export const req = (typeUrl: string, delta = false) =>
  Buffer.from(delta ? TYPES.DeltaReq.encode(TYPES.DeltaReq.create({ typeUrl })).finish() : TYPES.Req.encode(TYPES.Req.create({ typeUrl })).finish());
export const res = (typeUrl: string, nonce: string, version = "v1", resources = [Buffer.from("payload")]) =>
  Buffer.from(TYPES.Res.encode(TYPES.Res.create({ typeUrl, versionInfo: version, nonce, resources: resources.map((value) => ({ typeUrl, value })) })).finish());

export function rig(
  o: {
    delta?: boolean;
    maxRequestBytes?: number;
    initial?: AgentRequest[];
    health?: AgentRequest;
    handler?: (b: Uint8Array) => void;
    ecds?: EcdsHook;
    /** The downstream call has writev (as the HTTP/2 server call): both parts land as one entry of `down`. */
    writev?: boolean;
    /** Log as JSON (fields that only JSON carries); `json()` parses the lines. */
    json?: boolean;
    /** Shared across rigs to see rate limiting per key. */
    logLimit?: LogLimiter;
    /** Run on every upstream write, after it is recorded (e.g. istiod failing on it). */
    onUpstreamWrite?: (h: UpstreamHandlers) => void;
  } = {},
) {
  const delta = o.delta ?? false;
  const ev: string[] = [];
  const down: Buffer[] = [];
  const up: Buffer[] = [];
  const finished: GrpcStatus[] = [];
  const opened: { path: string; delta: boolean }[] = [];
  const handled: string[] = [];
  /** What Envoy's writes answer: one value for all, or a function asked on each write. */
  let downWritable: boolean | (() => boolean) = true;
  const downAnswer = () => (typeof downWritable === "function" ? downWritable() : downWritable);
  let upWritable = true;
  let uh: UpstreamHandlers | undefined;
  const jsonLines: string[] = [];
  const mem = o.json
    ? { lines: jsonLines, log: new LogSink({ outputLevels: "all:debug", json: true, write: (l) => jsonLines.push(l) }).logger() }
    : memoryLogger();
  const call: DownstreamCall = {
    delta,
    path: delta ? DELTA_PATH : SOTW_PATH,
    finished: false,
    write: (b) => (down.push(Buffer.from(b)), downAnswer()),
    pause: () => ev.push("down.pause"),
    resume: () => ev.push("down.resume"),
    finish: (s) => finished.push(s),
    ...(o.writev ? { writev: (a: Uint8Array, b: Uint8Array) => (down.push(Buffer.concat([a, b])), downAnswer()) } : {}),
  };
  const metric = (name: string) => ({
    inc: (a?: unknown, b?: unknown) =>
      ev.push(`${name}${typeof a === "object" ? ` ${JSON.stringify(a)}` : ""}${typeof a === "number" ? ` ${a}` : ""}${b !== undefined ? ` ${b}` : ""}`),
  });
  const metrics = {
    istiodConnectionFailures: metric("failures"),
    istiodConnectionTerminations: metric("istiod-terminations"),
    envoyConnectionTerminations: metric("envoy-terminations"),
    requests: metric("requests"),
    responses: metric("responses"),
    bytesUpstream: metric("bytes-up"),
    bytesDownstream: metric("bytes-down"),
    recvMax: { record: (n: number) => ev.push(`recv-max ${n}`) },
  } as unknown as XdsMetrics;
  const internal = new Map([[NAME_TABLE_TYPE, o.handler ?? ((b: Uint8Array) => handled.push(Buffer.from(b).toString()))]]);
  const relay = new StreamRelay(call, {
    codec,
    internal,
    initialRequests: o.initial ?? [],
    lastHealth: () => o.health,
    maxRequestBytes: o.maxRequestBytes ?? 1 << 20,
    log: mem.log,
    logLimit: o.logLimit ?? new LogLimiter({ burst: 100, windowMs: 1000, now: () => 0 }),
    metrics,
    onUpstreamConnected: () => ev.push("connected"),
    ...(o.ecds ? { ecds: o.ecds } : {}),
  });
  const dh = relay.start({
    describe: "istiod:15012",
    open: (meta, h) => {
      opened.push(meta);
      uh = h;
      return {
        write: (b) => (up.push(Buffer.from(b)), o.onUpstreamWrite?.(h), upWritable),
        pause: () => ev.push("up.pause"),
        resume: () => ev.push("up.resume"),
        close: () => ev.push("up.close"),
      };
    },
  });
  /** Upstream requests decoded with Envoy's schema. */
  const sent = () => {
    const wire = Buffer.concat(up);
    const out: { typeUrl: string; version: string; nonce: string; error?: string }[] = [];
    for (let i = 0; i < wire.length;) {
      const len = wire.readUInt32BE(i + 1);
      const m = (delta ? TYPES.DeltaReq : TYPES.Req).decode(wire.subarray(i + 5, i + 5 + len)).toJSON() as {
        typeUrl?: string;
        versionInfo?: string;
        responseNonce?: string;
        errorDetail?: { message?: string };
      };
      out.push({
        typeUrl: m.typeUrl ?? "",
        version: m.versionInfo ?? "",
        nonce: m.responseNonce ?? "",
        ...(m.errorDetail ? { error: m.errorDetail.message ?? "" } : {}),
      });
      i += 5 + len;
    }
    return out;
  };
  const lines = () => mem.lines.map((l) => l.split("\t").slice(1, 3).join(" "));
  return {
    relay,
    dh,
    ev,
    down,
    up,
    finished,
    opened,
    handled,
    sent,
    lines,
    json: () => mem.lines.map((l) => JSON.parse(l) as Record<string, unknown>),
    up_: () => uh!,
    setDownWritable: (w: boolean | (() => boolean)) => (downWritable = w),
    setUpWritable: (w: boolean) => (upWritable = w),
  };
}
