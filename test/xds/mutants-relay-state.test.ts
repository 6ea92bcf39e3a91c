// The relay's state and order, continued from mutants-relay.test.ts (mutation testing, npm run
// mutate -- xds-relay): a close in the middle of a chunk, the end-of-message decision for an empty
// response, cut-through once the type is known, a dropped message whose later bytes look like an
// Envoy type, ECDS messages in pieces, the idle state after a message, shutdown inside a gRPC
// prefix, writes to a full Envoy, the fields only JSON logs carry, and rate limiting per kind of
// line. Statuses, bytes and log lines are literals.

import { describe, expect, test } from "bun:test";
import { LogLimiter } from "../../src/lib/loglimit.ts";
import { grpcFrame } from "../../src/xds/grpcframe.ts";
import type { EcdsHook } from "../../src/wasm/ecds.ts";
import { NAME_TABLE_TYPE } from "../../src/xds/types.ts";
import { until } from "../sds/fake-clock.ts";
import { CDS, hex, req, res, rig } from "./relay-rig.ts";
import { TYPES } from "./harness.ts";

const DROPPED = "type.googleapis.com/foo.Bar";
const DROP_LINE = (t: string) => `error dropping response of type "${t}": not an Envoy type, not handled by the agent`;
/** A protobuf string field: tag (field 4 = type_url, wire type 2), one-octet length, the text. */
const typeUrlField = (t: string) => Buffer.concat([Buffer.from([0x22, t.length]), Buffer.from(t)]);

describe("relay: requests, state", () => {
  test("a request over the limit ends the stream and nothing else happens: no log line, nothing sent", () => {
    const at = req(CDS);
    const r = rig({ maxRequestBytes: at.length - 1 });
    r.dh.onData(Buffer.concat([grpcFrame(at), grpcFrame(req(CDS))]));
    expect(r.finished).toEqual([{ code: 8, message: `request of ${at.length} bytes exceeds the limit of ${at.length - 1} (ISTIO_GPRC_MAXRECVMSGSIZE)` }]);
    expect(r.lines()).toEqual([]);
    expect(r.up).toEqual([]);
  });

  test("istiod failing on the first write: the rest of the same chunk is neither sent nor counted", () => {
    const r = rig({ onUpstreamWrite: (h) => h.onClose({ code: 14, message: "connection reset" }, false) });
    r.dh.onData(Buffer.concat([grpcFrame(req(CDS)), grpcFrame(req(CDS))]));
    expect(r.finished).toEqual([{ code: 14, message: "connection reset" }]);
    expect(r.up).toHaveLength(1);
    expect(r.ev.filter((e) => e === "requests")).toEqual(["requests"]);
  });
});

describe("relay: responses, state", () => {
  test("an empty response is decided at its end (type unknown: dropped with a line); the stream goes on", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const after = grpcFrame(res(CDS, "n1"));
    r.up_().onData(Buffer.concat([grpcFrame(new Uint8Array(0)), after]));
    expect(r.lines()).toEqual([DROP_LINE("")]);
    expect(hex(Buffer.concat(r.down))).toBe(hex(after));
    expect(r.finished).toEqual([]);
  });

  test("a message goes on to Envoy as soon as its type is known, not at its end", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const f = grpcFrame(res(CDS, "n1"));
    const typeEnd = f.indexOf(Buffer.from(CDS)) + CDS.length; // the first resource's type_url, whole
    r.up_().onData(f.subarray(0, 8)); // the prefix and 3 octets: undecided
    expect(r.down).toEqual([]);
    r.up_().onData(f.subarray(8, typeEnd));
    expect(hex(Buffer.concat(r.down))).toBe(hex(f.subarray(0, typeEnd)));
    r.up_().onData(f.subarray(typeEnd));
    expect(hex(Buffer.concat(r.down))).toBe(hex(f));
  });

  test("a dropped message stays dropped to its end, even where its later bytes read as an Envoy type", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const first = typeUrlField(DROPPED);
    const f = grpcFrame(Buffer.concat([first, typeUrlField(CDS)]));
    r.up_().onData(f.subarray(0, 5 + first.length));
    r.up_().onData(f.subarray(5 + first.length));
    const after = grpcFrame(res(CDS, "n2"));
    r.up_().onData(after); // sentinel
    expect(hex(Buffer.concat(r.down))).toBe(hex(after));
    expect(r.lines()).toEqual([DROP_LINE(DROPPED)]);
  });

  test("an ECDS response arriving in pieces is converted whole", async () => {
    const ECDS = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig";
    const got: string[] = [];
    const ecds: EcdsHook = {
      typeUrl: ECDS,
      observeRequest: () => {},
      convert: (msg) => (got.push(hex(msg)), Promise.resolve({ kind: "forward", message: Buffer.from("converted") })),
    };
    const r = rig({ ecds });
    r.dh.onData(grpcFrame(req(CDS)));
    const body = res(ECDS, "e1");
    const f = grpcFrame(body);
    r.up_().onData(f.subarray(0, f.length - 4)); // decided: the type is in the first piece
    r.up_().onData(f.subarray(f.length - 4, f.length - 2));
    r.up_().onData(f.subarray(f.length - 2));
    expect(got).toEqual([hex(body)]);
    await until(() => r.down.length > 0, "converted message written");
    expect(hex(Buffer.concat(r.down))).toBe(hex(grpcFrame(Buffer.from("converted"))));
  });

  test("a response typed only by its resources is ACKed with that type", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const body = TYPES.Res.encode(
      TYPES.Res.create({ versionInfo: "v1", nonce: "n1", resources: [{ typeUrl: NAME_TABLE_TYPE, value: Buffer.from("t") }] }),
    ).finish();
    r.up_().onData(grpcFrame(body));
    expect(r.handled).toEqual(["t"]);
    expect(r.sent().slice(1)).toEqual([{ typeUrl: NAME_TABLE_TYPE, version: "v1", nonce: "n1" }]);
  });

  test("after the stream ended, istiod's data is neither forwarded nor counted", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.relay.close({ code: 0, message: "" });
    r.up_().onData(grpcFrame(res(CDS, "n1")));
    expect(r.down).toEqual([]);
    expect(r.ev.filter((e) => e === "responses")).toEqual([]);
  });

  test("a compressed delta response is named as a DeltaDiscoveryResponse", () => {
    const r = rig({ delta: true });
    r.dh.onData(grpcFrame(req(CDS, true)));
    const f = grpcFrame(res(CDS, "n1"));
    f[0] = 1;
    r.up_().onData(f);
    expect(r.finished).toEqual([
      { code: 13, message: "malformed DeltaDiscoveryResponse from istiod: compressed response message (the agent asked for identity encoding) at byte 0" },
    ]);
  });
});

describe("relay: ends, state", () => {
  test("istiod ending with OK right after a whole message: OK (the relay is idle again)", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onData(grpcFrame(res(CDS, "n1")));
    r.up_().onClose({ code: 0, message: "" }, true);
    expect(r.finished).toEqual([{ code: 0, message: "" }]);
  });

  test("istiod failing in the middle of a message: its own status, not the mid-message INTERNAL", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onData(grpcFrame(res(CDS, "n1")).subarray(0, 8));
    r.up_().onClose({ code: 14, message: "goaway" }, true);
    expect(r.finished).toEqual([{ code: 14, message: "goaway" }]);
  });

  test("shutdown with part of a response's 5-octet prefix received waits for that message", async () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const f = grpcFrame(res(CDS, "n1"));
    r.up_().onData(f.subarray(0, 3));
    const done = r.relay.shutdown({ code: 14, message: "bye" }, 60_000);
    expect(r.finished).toEqual([]);
    r.up_().onData(f.subarray(3));
    await done;
    expect(hex(Buffer.concat(r.down))).toBe(hex(f));
    expect(r.finished).toEqual([{ code: 14, message: "bye" }]);
  });
});

describe("relay: writes to Envoy", () => {
  test("a message's prefix and first chunk go as one write where the call can (one DATA frame)", () => {
    const r = rig({ writev: true });
    r.dh.onData(grpcFrame(req(CDS)));
    const f = grpcFrame(res(CDS, "n1"));
    r.up_().onData(f);
    expect(r.down.map(hex)).toEqual([hex(f)]);
  });

  test("a full Envoy still gets the whole message (prefix and first chunk) before istiod is paused", () => {
    for (const writev of [false, true]) {
      const r = rig({ writev });
      r.dh.onData(grpcFrame(req(CDS)));
      r.setDownWritable(false);
      const f = grpcFrame(res(CDS, "n1"));
      r.up_().onData(f);
      expect(hex(Buffer.concat(r.down))).toBe(hex(f));
      expect(r.ev.filter((e) => e === "up.pause")).toEqual(["up.pause"]);
    }
  });

  test("without writev, Envoy full after the first chunk (the prefix still fit) pauses istiod too", () => {
    const r = rig();
    r.dh.onData(grpcFrame(req(CDS)));
    const answers = [true, false];
    r.setDownWritable(() => answers.shift() ?? true);
    r.up_().onData(grpcFrame(res(CDS, "n1")));
    expect(r.ev.filter((e) => e === "up.pause")).toEqual(["up.pause"]);
  });
});

describe("relay: log lines", () => {
  test("JSON logs carry the type of a dropped response and the type, version and nonce of a rejected one", () => {
    const r = rig({
      json: true,
      handler: () => {
        throw new Error("bad table");
      },
    });
    r.dh.onData(grpcFrame(req(CDS)));
    r.up_().onData(Buffer.concat([grpcFrame(res(DROPPED, "n1")), grpcFrame(res(NAME_TABLE_TYPE, "n2", "v2"))]));
    const lines = r.json().map(({ time: _t, ...rest }) => rest);
    expect(lines).toEqual([
      { level: "error", msg: DROP_LINE(DROPPED).slice("error ".length), type_url: DROPPED },
      { level: "warn", msg: `rejecting ${NAME_TABLE_TYPE} version v2 (nonce n2): bad table`, type_url: NAME_TABLE_TYPE, version: "v2", nonce: "n2" },
    ]);
  });

  test("rate limiting is per kind of line: Envoy churning streams does not silence istiod's lines", () => {
    const limit = new LogLimiter({ burst: 1, windowMs: 60_000, now: () => 0 });
    const a = rig({ logLimit: limit });
    a.dh.onData(grpcFrame(req(CDS)));
    a.dh.onClientGone(true);
    const b = rig({ logLimit: limit });
    b.dh.onData(grpcFrame(req(CDS)));
    b.dh.onClientGone(true); // over the burst of this kind: not written
    b.up_().onClose({ code: 0, message: "" }, true); // after the stream ended: nothing
    const c = rig({ logLimit: limit });
    c.dh.onData(grpcFrame(req(CDS)));
    c.up_().onClose({ code: 0, message: "" }, true);
    expect([a.lines(), b.lines(), c.lines()]).toEqual([
      ["info downstream closed its stream, closing upstream stream"],
      [],
      ["info upstream stream ended by istiod"],
    ]);
  });
});
