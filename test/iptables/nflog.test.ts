// NFLOG wire format (pure encode/decode) and the tracer's log line, without a kernel.

import { describe, expect, test } from "bun:test";
import { bindGroupMessages, decodeMessages, encodeConfig, type NflogPacket } from "../../native/nflog.ts";
import { IptablesTracer, describePacket, packetAddresses, type NflogSource } from "../../src/iptables/tracer.ts";
import { memoryLogger } from "../../src/lib/log.ts";

function nla(type: number, data: number[]): number[] {
  const len = 4 + data.length;
  const out = [len & 0xff, len >> 8, type & 0xff, type >> 8, ...data];
  while (out.length % 4) out.push(0);
  return out;
}
const be32 = (n: number) => [n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];

function packetMessage(): Uint8Array {
  const ipHeader = [0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 250, 1, 2, 10, 250, 1, 1];
  const attrs = [
    ...nla(1, [0x08, 0x00, 3, 0]),
    ...nla(10, [...new TextEncoder().encode("JumpOutbound"), 0]),
    ...nla(11, be32(1000)),
    ...nla(14, be32(1001)),
    ...nla(5, be32(2)),
    ...nla(9, ipHeader),
  ];
  const body = [2, 0, 0x05, 0x39, ...attrs];
  const len = 16 + body.length;
  return Uint8Array.from([len & 0xff, len >> 8, 0, 0, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ...body]);
}

describe("NFLOG wire format", () => {
  test("config messages: nfnetlink ULOG config type, request+ack, group in network order", () => {
    const m = encodeConfig(7, 0, 1337, []);
    const v = new DataView(m.buffer);
    expect([v.getUint32(0, true), v.getUint16(4, true), v.getUint16(6, true), v.getUint32(8, true), v.getUint16(18, false)]).toEqual([20, 0x0401, 5, 7, 1337]);
    const seq = bindGroupMessages(1337, 1);
    expect(seq.map((s) => [s.seq, s.mayFail])).toEqual([
      [1, true],
      [2, false],
      [3, false],
      [4, false],
    ]);
    expect(Array.from(seq[1]!.msg.subarray(20, 28))).toEqual([5, 0, 1, 0, 1, 0, 0, 0]); // NFULA_CFG_CMD bind
  });
  test("decodes packets and acks", () => {
    const ack = Uint8Array.from([36, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, ...new Array(16).fill(0)]);
    const both = new Uint8Array([...packetMessage(), ...ack]);
    const msgs = decodeMessages(both);
    expect(msgs[1]).toEqual({ kind: "ack", seq: 3, errno: 1 });
    const p = (msgs[0] as { kind: "packet"; packet: NflogPacket }).packet;
    expect({ ...p, payload: undefined }).toEqual({ prefix: "JumpOutbound", uid: 1000, gid: 1001, outIfindex: 2, hwProtocol: 0x0800, payload: undefined });
    expect(packetAddresses(p.payload)).toEqual({ src: "10.250.1.2", dst: "10.250.1.1" });
  });
  test("truncated input never throws", () => {
    const m = packetMessage();
    for (let i = 0; i < m.length; i++) expect(() => decodeMessages(m.subarray(0, i))).not.toThrow();
  });
});

describe("tracer", () => {
  test("one log line per packet under the iptables scope, with named devices", async () => {
    const p = (decodeMessages(packetMessage())[0] as { kind: "packet"; packet: NflogPacket }).packet;
    expect(describePacket(p, (i) => (i === 2 ? "eth0" : undefined))).toEqual({
      msg: "direct all traffic through ISTIO_OUTPUT chain",
      fields: { command: "JumpOutbound", uid: 1000, gid: 1001, inDev: "", outDev: "eth0", src: "10.250.1.2", dst: "10.250.1.1" },
    });
    const queue = [[p], [], [p]];
    let closed = false;
    const src: NflogSource = { drain: () => queue.shift() ?? [], interfaceName: () => "eth0", close: () => (closed = true), overruns: 0 };
    const mem = memoryLogger();
    const tracer = new IptablesTracer({ log: mem.log.child("iptables"), open: async () => src, pollIntervalMs: 1 });
    const ac = new AbortController();
    await tracer.start(ac.signal);
    for (let i = 0; i < 200 && mem.lines.filter((l) => l.includes("command=JumpOutbound")).length < 2; i++) await Bun.sleep(2);
    ac.abort();
    await tracer.stopped();
    const lines = mem.lines.filter((l) => l.includes("command=JumpOutbound"));
    expect(lines.length).toBe(2);
    expect(lines[0]).toContain(
      "\tiptables\tdirect all traffic through ISTIO_OUTPUT chain\tcommand=JumpOutbound\tuid=1000\tgid=1001\tinDev=\toutDev=eth0\tsrc=10.250.1.2\tdst=10.250.1.1",
    );
    expect(closed).toBe(true);
  });
  test("a socket that cannot be opened is reported, not fatal", async () => {
    const mem = memoryLogger();
    const tracer = new IptablesTracer({
      log: mem.log,
      open: async () => {
        throw new Error("EPERM");
      },
    });
    await tracer.start(new AbortController().signal);
    expect(mem.lines.join("\n")).toContain("could not open nflog socket: EPERM");
  });
});
