// One SDS stream's protocol handling (src/sds/streams.ts) driven directly, without gRPC: what the
// client receives (decoded with Envoy's own protos, not the agent's codec), in what order, which
// metrics and log lines each request gives, and how a failure or a close ends the stream. Found
// by mutation testing (npm run mutate -- sds-streams).

import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/lib/clock.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { SdsError } from "../../src/sds/errors.ts";
import type { SecretItem } from "../../src/sds/item.ts";
import { sdsCodec, type DeltaDiscoveryRequest, type DiscoveryRequest } from "../../src/sds/proto.ts";
import { DeltaStream, isInvalid, resourcesFor, SotwStream, type StreamCtx } from "../../src/sds/streams.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

const SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
const codec = sdsCodec();
const root = envoyProtoRoot();
const Res = root.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
const DRes = root.lookupType("envoy.service.discovery.v3.DeltaDiscoveryResponse");
const Secret = root.lookupType("envoy.extensions.transport_sockets.tls.v3.Secret");

const ITEMS: Record<string, SecretItem> = {
  default: { resourceName: "default", certificateChain: "CHAIN-1", privateKey: "KEY-1", createdMs: 1, expireMs: 2, version: "v-default-1" },
  ROOTCA: { resourceName: "ROOTCA", rootCert: "ROOT-1", createdMs: 0, expireMs: 0, version: "v-root-1" },
};

/** What the client would read: Envoy's own decoding of each frame sent. */
function sotw(frame: Uint8Array) {
  const o = Res.toObject(Res.decode(frame), { defaults: true }) as Record<string, any>;
  return {
    version: o.version_info as string,
    nonce: o.nonce as string,
    typeUrl: o.type_url as string,
    secrets: (o.resources as { type_url: string; value: Uint8Array }[]).map((a) => ({ typeUrl: a.type_url, ...secret(a.value) })),
  };
}

function delta(frame: Uint8Array) {
  const o = DRes.toObject(DRes.decode(frame), { defaults: true }) as Record<string, any>;
  return {
    systemVersion: o.system_version_info as string,
    nonce: o.nonce as string,
    typeUrl: o.type_url as string,
    removed: o.removed_resources as string[],
    resources: (o.resources as { name: string; version: string; resource: { value: Uint8Array } }[]).map((r) => {
      // The Secret inside names itself as the resource does; a difference shows up as `secretName`.
      const { name: secretName, ...rest } = secret(r.resource.value);
      return { name: r.name, version: r.version, ...rest, ...(secretName !== r.name ? { secretName } : {}) };
    }),
  };
}

function secret(b: Uint8Array): { name: string; chain?: string; key?: string; ca?: string; crl?: string } {
  const s = Secret.toObject(Secret.decode(b), { defaults: false }) as Record<string, any>;
  const text = (x: { inline_bytes?: Uint8Array } | undefined) => (x?.inline_bytes ? Buffer.from(x.inline_bytes).toString() : undefined);
  const out: { name: string; chain?: string; key?: string; ca?: string; crl?: string } = { name: s.name };
  if (s.tls_certificate) {
    out.chain = text(s.tls_certificate.certificate_chain);
    out.key = text(s.tls_certificate.private_key);
  }
  if (s.validation_context) {
    out.ca = text(s.validation_context.trusted_ca);
    if (s.validation_context.crl?.filename) out.crl = s.validation_context.crl.filename;
  }
  return out;
}

interface Rig {
  ctx: StreamCtx;
  sent: Uint8Array[];
  failed: { message: string; invalid: boolean }[];
  metrics: string[];
  lines: string[];
  items: Record<string, SecretItem>;
  /** Names whose get() waits until released. */
  held: Map<string, () => void>;
  hold(name: string): void;
  signals: AbortSignal[];
  /** Every get() the stream made, settled or not. */
  gets: Promise<unknown>[];
  io: { send(f: Buffer): void; fail(e: Error, invalid: boolean): void };
  /** Resolves once `n` frames have been sent. */
  frames(n: number): Promise<void>;
}

function rig(o: { crl?: string; fail?: Record<string, Error>; sendMs?: number } = {}): Rig {
  const log = memoryLogger("all:debug");
  let version = 0;
  const clock = new ManualClock(1000);
  const sent: Uint8Array[] = [];
  const waiters: { n: number; r: () => void }[] = [];
  const held = new Map<string, () => void>();
  const gates = new Map<string, Promise<void>>();
  const signals: AbortSignal[] = [];
  const gets: Promise<unknown>[] = [];
  const metrics: string[] = [];
  const items = { ...ITEMS };
  const r: Rig = {
    sent,
    failed: [],
    metrics,
    lines: log.lines,
    items,
    held,
    signals,
    gets,
    hold(name) {
      gates.set(name, new Promise<void>((res) => held.set(name, res)));
    },
    io: {
      send(f) {
        clock.advance(o.sendMs ?? 0);
        sent.push(new Uint8Array(f));
        for (const w of waiters.filter((x) => sent.length >= x.n)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.r();
        }
      },
      fail(e, invalid) {
        r.failed.push({ message: e.message, invalid });
      },
    },
    frames: (n) => (sent.length >= n ? Promise.resolve() : new Promise((res) => waiters.push({ n, r: res }))),
    ctx: {
      codec,
      log: log.log,
      clock,
      nextVersion: () => `v${++version}`,
      secrets: {
        get(name, signal) {
          if (signal) signals.push(signal);
          const gate = gates.get(name);
          gates.delete(name);
          const p = (async () => {
            if (gate) await gate;
            if (o.fail?.[name]) throw o.fail[name];
            const it = items[name];
            if (!it) throw new SdsError(`unknown SDS resource "${name}"`, name);
            return it;
          })();
          gets.push(p);
          return p;
        },
        crlFor: (name) => (name === "ROOTCA" ? o.crl : undefined),
      },
      xdsMetrics: {
        expiredNonce: { inc: (l: Record<string, string>) => void metrics.push(`expired ${JSON.stringify(l)}`) } as never,
        totalRejects: { inc: (l: Record<string, string>) => void metrics.push(`rejects ${JSON.stringify(l)}`) } as never,
        sendTime: { observe: (v: number) => void metrics.push(`send ${v}`) } as never,
        recvMax: { record: () => {} },
      },
    },
  };
  return r;
}

const req = (names: string[], nonce = "", errorDetail?: { code: number; message: string }): DiscoveryRequest => ({
  versionInfo: "",
  resourceNames: names,
  typeUrl: SECRET,
  responseNonce: nonce,
  ...(errorDetail ? { errorDetail } : {}),
});

const dreq = (o: Partial<DeltaDiscoveryRequest>): DeltaDiscoveryRequest => ({
  typeUrl: SECRET,
  resourceNamesSubscribe: [],
  resourceNamesUnsubscribe: [],
  initialResourceVersions: {},
  responseNonce: "",
  ...o,
});

/**
 * Every read the stream started has settled, and what the stream does after a read (send, fail,
 * log) has run: those continuations are microtasks, all drained before the next macrotask. The
 * fakes do no I/O, so nothing else can still be pending: an absence checked after this is real.
 */
async function settled(r: Rig): Promise<void> {
  for (let n = -1; n !== r.gets.length;) {
    n = r.gets.length;
    await Promise.allSettled(r.gets);
    await Bun.sleep(0);
  }
}

/** The log lines as `level\tmessage\tfields` (the timestamp cut off). */
const logged = (r: Rig) => r.lines.map((l) => l.slice(l.indexOf("\t") + 1));

/** Lets queued stream work run (each step is a microtask chain on resolved promises). */
const drain = async (s: SotwStream | DeltaStream, r: Rig) => {
  // A later push on a name the stream watches is the sentinel: its frame follows everything queued before.
  const before = r.sent.length;
  s.push("default");
  await r.frames(before + 1);
  r.sent.pop();
};

describe("SotwStream", () => {
  test("the first request is answered with every name, typed as Secret, version from the server's counter", async () => {
    const r = rig({ crl: "/etc/certs/crl.pem" });
    const s = new SotwStream(r.ctx, r.io, "conn-1");
    s.onRequest(req(["default", "ROOTCA", "default"]));
    await r.frames(1);
    const f = sotw(r.sent[0]!);
    expect(f.version).toBe("v1");
    expect(f.typeUrl).toBe(SECRET);
    expect(f.nonce).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(f.secrets).toEqual([
      { typeUrl: SECRET, name: "default", chain: "CHAIN-1", key: "KEY-1" },
      { typeUrl: SECRET, name: "ROOTCA", ca: "ROOT-1", crl: "/etc/certs/crl.pem" },
    ]);
    expect(r.metrics).toEqual(["send 0"]); // the manual clock did not move while sending
    expect(r.lines.some((l) => l.includes("debug") && l.includes("SDS: pushed default,ROOTCA") && l.includes("conn-1"))).toBe(true);
    expect(s.watches("default")).toBe(true);
    expect(s.watches("ROOTCA")).toBe(true);
    expect(s.watches("file-root:/x")).toBe(false);
  });

  test("ACK, stale nonce, NACK, added and removed names, unsubscribe: what each sends and counts", async () => {
    const r = rig();
    const s = new SotwStream(r.ctx, r.io, "c");
    s.onRequest(req(["default"]));
    await r.frames(1);
    const n1 = sotw(r.sent[0]!).nonce;
    s.onRequest(req(["default"], n1)); // ACK
    s.onRequest(req(["default"], "not-the-last-nonce")); // stale
    expect(r.metrics).toEqual(["send 0", 'expired {"type":"sds"}']);
    s.onRequest(req(["default"], n1, { code: 13, message: "bad certificate" })); // NACK
    expect(r.metrics.at(-1)).toBe('rejects {"type":"sds"}');
    expect(r.lines.some((l) => l.includes("warn") && l.includes("SDS: Envoy rejected default: bad certificate"))).toBe(true);
    s.onRequest(req(["default", "ROOTCA"], n1)); // one name added: only it is sent
    await r.frames(2);
    const f2 = sotw(r.sent[1]!);
    expect(f2.secrets.map((x) => x.name)).toEqual(["ROOTCA"]);
    expect(f2.version).toBe("v2");
    // The stream's last nonce is now the second response's: the first one is stale.
    s.onRequest(req(["default", "ROOTCA"], n1));
    expect(r.metrics.filter((m) => m.startsWith("expired")).length).toBe(2);
    s.onRequest(req(["default"], f2.nonce)); // ROOTCA removed: nothing sent
    expect(s.watches("ROOTCA")).toBe(false);
    s.push("ROOTCA"); // not watched any more
    await drain(s, r);
    expect(r.sent.length).toBe(2);
    s.onRequest(req([])); // unsubscribe
    expect(s.watches("default")).toBe(false);
    s.push("default");
    s.onRequest(req(["ROOTCA"])); // empty nonce: answered whole
    await r.frames(3);
    expect(sotw(r.sent[2]!).secrets.map((x) => x.name)).toEqual(["ROOTCA"]);
    expect(r.sent.length).toBe(3); // the push to the unwatched default sent nothing
    expect(r.failed).toEqual([]);
  });

  test("a NACK as the first request sends nothing and counts one reject", async () => {
    const r = rig();
    const s = new SotwStream(r.ctx, r.io, "c");
    s.onRequest(req(["default"], "", { code: 3, message: "no" }));
    expect(r.metrics).toEqual(['rejects {"type":"sds"}']);
    // It was a request: the next one with the empty nonce is answered (respond on empty nonce).
    s.onRequest(req(["default"]));
    await r.frames(1);
    expect(sotw(r.sent[0]!).secrets.map((x) => x.name)).toEqual(["default"]);
  });

  test("pushes and responses never interleave: a slow secret's frame still comes first", async () => {
    const r = rig();
    const s = new SotwStream(r.ctx, r.io, "c");
    r.hold("ROOTCA");
    s.onRequest(req(["ROOTCA", "default"]));
    s.push("default");
    await Bun.sleep(0);
    expect(r.sent.length).toBe(0); // held: the second send must wait for the first
    r.held.get("ROOTCA")!();
    await r.frames(2);
    expect(
      r.sent.map((f) =>
        sotw(f)
          .secrets.map((x) => x.name)
          .join(","),
      ),
    ).toEqual(["ROOTCA,default", "default"]);
    expect(r.sent.map((f) => sotw(f).version)).toEqual(["v1", "v2"]);
  });

  test("a generation failure ends the stream once with its status; invalid names are the client's fault", async () => {
    const r = rig({ fail: { default: new Error("CA unavailable") } });
    const s = new SotwStream(r.ctx, r.io, "c9");
    s.onRequest(req(["default"]));
    await settled(r);
    expect(r.failed).toEqual([{ message: "CA unavailable", invalid: false }]);
    expect(r.lines.some((l) => l.includes("warn") && l.includes("SDS: generating default failed: CA unavailable") && l.includes("c9"))).toBe(true);
    s.push("default"); // dead: nothing more
    s.onRequest(req(["ROOTCA"]));
    await settled(r);
    expect(r.gets.length).toBe(1); // the dead stream read nothing more
    expect(r.sent.length).toBe(0);
    expect(r.failed.length).toBe(1);

    const r2 = rig();
    const s2 = new SotwStream(r2.ctx, r2.io, "c");
    s2.onRequest(req(["bogus-name"]));
    await settled(r2);
    expect(r2.failed).toEqual([{ message: 'unknown SDS resource "bogus-name"', invalid: true }]);
  });

  test("close() while a secret is being read: the read's signal aborts naming the stream; nothing sent or failed", async () => {
    const r = rig();
    const s = new SotwStream(r.ctx, r.io, "conn-7");
    r.hold("default");
    s.onRequest(req(["default"]));
    await Bun.sleep(0);
    expect(r.signals.length).toBe(1);
    expect(r.signals[0]!.aborted).toBe(false);
    s.close();
    expect(r.signals[0]!.aborted).toBe(true);
    expect(String((r.signals[0]!.reason as Error).message)).toBe("SDS stream conn-7 closed");
    r.held.get("default")!();
    s.push("default");
    await settled(r);
    expect(r.sent.length).toBe(0);
    expect(r.failed).toEqual([]);
  });

  test("close() while a failing read is pending: the failure is not reported", async () => {
    const r = rig({ fail: { default: new Error("gone") } });
    const s = new SotwStream(r.ctx, r.io, "c");
    r.hold("default");
    s.onRequest(req(["default"]));
    await Bun.sleep(0);
    s.close();
    r.held.get("default")!();
    await settled(r);
    expect(r.failed).toEqual([]);
    expect(r.lines.some((l) => l.includes("generating"))).toBe(false);
  });
});

describe("SotwStream: first request, log lines, send time", () => {
  test("a first request carrying a nonce from an earlier stream is answered, not taken for a stale one", async () => {
    const r = rig();
    const s = new SotwStream(r.ctx, r.io, "c");
    s.onRequest(req(["default"], "nonce-of-the-previous-connection"));
    await r.frames(1);
    expect(sotw(r.sent[0]!).secrets.map((x) => x.name)).toEqual(["default"]);
    expect(r.metrics.filter((m) => m.startsWith("expired"))).toEqual([]);
  });

  test("each request kind logs its line, naming the stream", async () => {
    const r = rig();
    const s = new SotwStream(r.ctx, r.io, "conn-3");
    s.onRequest(req(["default", "ROOTCA"]));
    await r.frames(1);
    const n1 = sotw(r.sent[0]!).nonce;
    s.onRequest(req(["default", "ROOTCA"], n1));
    s.onRequest(req(["default", "ROOTCA"], "old"));
    s.onRequest(req(["default", "ROOTCA"], n1, { code: 3, message: "" }));
    s.onRequest(req(["default", "ROOTCA"], n1, { code: 3 } as { code: number; message: string }));
    s.onRequest(req([]));
    expect(logged(r)).toEqual([
      "debug\tSDS: pushed default,ROOTCA\tconn=conn-3",
      "debug\tSDS: request ignored (ack)\tconn=conn-3",
      "debug\tSDS: request ignored (stale nonce)\tconn=conn-3",
      "warn\tSDS: Envoy rejected default,ROOTCA: \tconn=conn-3",
      "warn\tSDS: Envoy rejected default,ROOTCA: \tconn=conn-3",
      "debug\tSDS: client unsubscribed\tconn=conn-3",
    ]);
  });

  test("a failure of two names logs both, comma-separated", async () => {
    const r = rig({ fail: { ROOTCA: new Error("no bundle") } });
    const s = new SotwStream(r.ctx, r.io, "c5");
    s.onRequest(req(["default", "ROOTCA"]));
    await settled(r);
    expect(logged(r)).toEqual(["warn\tSDS: generating default,ROOTCA failed: no bundle\tconn=c5"]);
  });

  test("send time is observed in seconds", async () => {
    const r = rig({ sendMs: 250 });
    const s = new SotwStream(r.ctx, r.io, "c");
    s.onRequest(req(["default"]));
    await r.frames(1);
    expect(r.metrics).toEqual(["send 0.25"]);
  });
});

describe("DeltaStream", () => {
  test("subscribe: each resource with its own version; '*' is not a name; the server's counter is the system version", async () => {
    const r = rig();
    const s = new DeltaStream(r.ctx, r.io, "d");
    s.onRequest(dreq({ resourceNamesSubscribe: ["*", "default", "ROOTCA"] }));
    await r.frames(1);
    const f = delta(r.sent[0]!);
    expect(f.systemVersion).toBe("v1");
    expect(f.typeUrl).toBe(SECRET);
    expect(f.nonce).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(f.removed).toEqual([]);
    expect(f.resources).toEqual([
      { name: "default", version: "v-default-1", chain: "CHAIN-1", key: "KEY-1" },
      { name: "ROOTCA", version: "v-root-1", ca: "ROOT-1" },
    ]);
    expect(s.watches("*")).toBe(false);
    expect(s.watches("default")).toBe(true);
  });

  test("initial versions count on the first request only; a version the client has is not sent again", async () => {
    const r = rig();
    const s = new DeltaStream(r.ctx, r.io, "d");
    s.onRequest(dreq({ resourceNamesSubscribe: ["default", "ROOTCA"], initialResourceVersions: { default: "v-default-1" } }));
    await r.frames(1);
    expect(delta(r.sent[0]!).resources.map((x) => x.name)).toEqual(["ROOTCA"]);
    // A second request's initial versions are ignored: unsubscribe then subscribe again sends default.
    s.onRequest(dreq({ resourceNamesUnsubscribe: ["default"] }));
    expect(s.watches("default")).toBe(false);
    s.onRequest(dreq({ resourceNamesSubscribe: ["default"], initialResourceVersions: { default: "v-default-1" } }));
    await r.frames(2);
    expect(delta(r.sent[1]!).resources.map((x) => [x.name, x.version])).toEqual([["default", "v-default-1"]]);
    // Same version again (a push without a change): nothing; a new version: sent.
    s.push("default");
    await settled(r);
    expect(r.sent.length).toBe(2);
    r.items.default = { ...ITEMS.default!, certificateChain: "CHAIN-2", version: "v-default-2" };
    s.push("default");
    await r.frames(3);
    expect(delta(r.sent[2]!).resources).toEqual([{ name: "default", version: "v-default-2", chain: "CHAIN-2", key: "KEY-1" }]);
    expect(r.sent.length).toBe(3);
  });

  test("an invalid name is listed as removed instead of failing the stream; an unsubscribed name is skipped", async () => {
    const r = rig();
    const s = new DeltaStream(r.ctx, r.io, "d");
    s.onRequest(dreq({ resourceNamesSubscribe: ["file-cert:only-one-path", "default"] }));
    await r.frames(1);
    const f = delta(r.sent[0]!);
    expect(f.removed).toEqual(["file-cert:only-one-path"]);
    expect(f.resources.map((x) => x.name)).toEqual(["default"]);
    s.push("ROOTCA"); // never subscribed
    s.onRequest(dreq({ resourceNamesSubscribe: ["ROOTCA"] }));
    await r.frames(2);
    expect(delta(r.sent[1]!).resources.map((x) => x.name)).toEqual(["ROOTCA"]);
    expect(r.sent.length).toBe(2);
    expect(r.failed).toEqual([]);
  });

  test("a NACK is logged and nothing else, even with names in it", async () => {
    const r = rig();
    const s = new DeltaStream(r.ctx, r.io, "d7");
    s.onRequest(dreq({ resourceNamesSubscribe: ["default"], errorDetail: { code: 3, message: "bad key" } }));
    expect(s.watches("default")).toBe(false);
    expect(r.lines.some((l) => l.includes("warn") && l.includes("SDS (delta): Envoy rejected a response: bad key") && l.includes("d7"))).toBe(true);
    // The first request that is not a NACK still counts as the first (initial versions honoured).
    s.onRequest(dreq({ resourceNamesSubscribe: ["default", "ROOTCA"], initialResourceVersions: { ROOTCA: "v-root-1" } }));
    await r.frames(1);
    expect(delta(r.sent[0]!).resources.map((x) => x.name)).toEqual(["default"]);
  });

  test("a failure ends the stream once (never the client's fault); close() stops everything", async () => {
    const r = rig({ fail: { ROOTCA: new Error("bundle unreadable") } });
    const s = new DeltaStream(r.ctx, r.io, "d");
    s.onRequest(dreq({ resourceNamesSubscribe: ["ROOTCA"] }));
    await settled(r);
    expect(r.failed).toEqual([{ message: "bundle unreadable", invalid: false }]);
    expect(r.lines.some((l) => l.includes("SDS (delta): generating ROOTCA failed: bundle unreadable"))).toBe(true);
    s.onRequest(dreq({ resourceNamesSubscribe: ["default"] }));
    await settled(r);
    expect(r.gets.length).toBe(1);
    expect(r.sent.length).toBe(0);
    expect(r.failed.length).toBe(1);

    const r2 = rig();
    const s2 = new DeltaStream(r2.ctx, r2.io, "d2");
    r2.hold("default");
    s2.onRequest(dreq({ resourceNamesSubscribe: ["default"] }));
    await Bun.sleep(0);
    s2.close();
    expect((r2.signals[0]!.reason as Error).message).toBe("SDS stream d2 closed");
    r2.held.get("default")!();
    await settled(r2);
    expect(r2.sent.length).toBe(0);
  });
});

describe("helpers", () => {
  test("resourcesFor attaches the CRL to root resources only", async () => {
    const r = rig({ crl: "/crl.pem" });
    const out = await resourcesFor(r.ctx, ["ROOTCA", "default"]);
    expect(out).toEqual([
      { name: "ROOTCA", kind: "root", trustedCa: "ROOT-1", crlFilename: "/crl.pem", version: "v-root-1" },
      { name: "default", kind: "tls", certificateChain: "CHAIN-1", privateKey: "KEY-1", version: "v-default-1" },
    ]);
  });

  test("isInvalid: only an SdsError naming an unparseable resource", () => {
    expect(isInvalid(new SdsError("x", "bogus"))).toBe(true);
    expect(isInvalid(new SdsError("x", "default"))).toBe(false);
    expect(isInvalid(new SdsError("x"))).toBe(false);
    expect(isInvalid(new Error("bogus"))).toBe(false);
  });
});

describe("DeltaStream: state changes while a read is pending", () => {
  test("a name unsubscribed while a push for it waits in the queue is not sent", async () => {
    const r = rig();
    const s = new DeltaStream(r.ctx, r.io, "d");
    s.onRequest(dreq({ resourceNamesSubscribe: ["default", "ROOTCA"] }));
    await r.frames(1);
    r.hold("default");
    r.items.ROOTCA = { ...ITEMS.ROOTCA!, rootCert: "ROOT-2", version: "v-root-2" };
    r.items.default = { ...ITEMS.default!, certificateChain: "CHAIN-2", version: "v-default-2" };
    s.push("default"); // its read is held
    s.push("ROOTCA"); // queued behind it
    await Bun.sleep(0);
    s.onRequest(dreq({ resourceNamesUnsubscribe: ["ROOTCA"] })); // before the queued push runs
    r.held.get("default")!();
    await settled(r);
    expect(
      r.sent.map((f) =>
        delta(f)
          .resources.map((x) => x.name)
          .join(","),
      ),
    ).toEqual(["default,ROOTCA", "default"]);
  });

  test("close() while a failing read is pending: the failure is not reported", async () => {
    const r = rig({ fail: { default: new Error("gone") } });
    const s = new DeltaStream(r.ctx, r.io, "d");
    r.hold("default");
    s.onRequest(dreq({ resourceNamesSubscribe: ["default"] }));
    await Bun.sleep(0);
    s.close();
    r.held.get("default")!();
    await settled(r);
    expect(r.failed).toEqual([]);
    expect(logged(r)).toEqual([]);
  });

  test("a failure of two names logs both, comma-separated, naming the stream", async () => {
    const r = rig({ fail: { ROOTCA: new Error("no bundle") } });
    const s = new DeltaStream(r.ctx, r.io, "d5");
    s.onRequest(dreq({ resourceNamesSubscribe: ["default", "ROOTCA"] }));
    await settled(r);
    expect(logged(r)).toEqual(["warn\tSDS (delta): generating default,ROOTCA failed: no bundle\tconn=d5"]);
  });
});
