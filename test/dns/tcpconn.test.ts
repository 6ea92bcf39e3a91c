// One DNS-over-TCP connection's state, sockets-free: a fake peer records what the connection does
// (writes, pause/resume, end) and the test runs its timers by hand. Pipelined queries up to the
// in-flight limit, then no reading until one is answered; a query's deadline from its first byte,
// not re-armed by more bytes; idle only when nothing is pending; replies the kernel did not take
// kept and written on drain, in order.
import { describe, expect, test } from "bun:test";
import { TcpDnsConnection, type TcpPeer } from "../../src/dns/tcpconn.ts";
import type { Reply } from "../../src/dns/handler.ts";

class FakePeer implements TcpPeer {
  written: number[][] = [];
  events: string[] = [];
  /** Bytes the next writes take (undefined: all). */
  takes: number | undefined;
  write(b: Uint8Array): number {
    const n = this.takes === undefined ? b.length : Math.min(this.takes, b.length);
    this.written.push([...b.subarray(0, n)]);
    return n;
  }
  pause(): void {
    this.events.push("pause");
  }
  resume(): void {
    this.events.push("resume");
  }
  end(): void {
    this.events.push("end");
  }
}

function timers() {
  const list: { ms: number; fn: () => void; live: boolean }[] = [];
  return {
    list,
    timer: (ms: number, fn: () => void) => {
      const t = { ms, fn, live: true };
      list.push(t);
      return { cancel: () => void (t.live = false) };
    },
    live: () => list.filter((t) => t.live).map((t) => t.ms),
    fire: (ms: number) => {
      const t = list.find((x) => x.live && x.ms === ms);
      if (!t) throw new Error(`no live ${ms} ms timer`);
      t.live = false;
      t.fn();
    },
  };
}

const frame = (id: number, len = 12) => {
  const b = new Uint8Array(len + 2);
  b[1] = len;
  b[2] = id;
  return b;
};
const limits = { idleMs: 8000, queryMs: 2000, maxInflight: 2, maxQueuedReplyBytes: 64 };

function conn(handle: (msg: Uint8Array) => Reply | Promise<Reply>) {
  const peer = new FakePeer();
  const t = timers();
  const errors: unknown[] = [];
  let slow = 0;
  const c = new TcpDnsConnection(peer, limits, { handle, timer: t.timer, onHandlerError: (e) => errors.push(e), onQueryTimeout: () => slow++ });
  return { c, peer, t, errors, slow: () => slow };
}

describe("TCP DNS connection", () => {
  test("pipelined queries: at most maxInflight dispatched; reading stops and resumes as answers come", async () => {
    const pending: ((r: Reply) => void)[] = [];
    const seen: number[] = [];
    const { c, peer } = conn((m) => {
      seen.push(m[0]!);
      return new Promise<Reply>((r) => pending.push(r));
    });
    const three = new Uint8Array([...frame(1), ...frame(2), ...frame(3)]);
    c.onData(three);
    expect(seen).toEqual([1, 2]);
    expect(peer.events).toEqual(["pause"]);
    pending.shift()!(new Uint8Array([1, 0, 0]));
    await Bun.sleep(0);
    expect(seen).toEqual([1, 2, 3]); // the buffered third is dispatched once there is room
    expect(peer.written).toEqual([[0, 3, 1, 0, 0]]);
    expect(peer.events).toEqual(["pause"]); // still two in flight: not read
    pending.shift()!(undefined);
    await Bun.sleep(0);
    expect(peer.events).toEqual(["pause", "resume"]);
    expect(c.pending).toBe(1);
  });

  test("a query trickled a byte at a time: its deadline runs from the first byte, more bytes do not re-arm it; it closes the connection", () => {
    const { c, peer, t, slow } = conn(() => new Uint8Array([9]));
    const f = frame(1, 40);
    for (let i = 0; i < 20; i++) c.onData(f.subarray(i, i + 1));
    expect(t.live()).toEqual([2000]); // one query deadline; the idle timer is off while a query is partial
    expect(t.list.filter((x) => x.ms === 2000).length).toBe(1);
    t.fire(2000);
    expect(slow()).toBe(1);
    expect(peer.events).toEqual(["end"]);
    c.onData(f.subarray(20));
    expect(peer.written).toEqual([]); // closed: the rest is ignored
  });

  test("a query completed in time clears its deadline; the next partial one gets a fresh one", () => {
    const { c, t, peer } = conn(() => new Uint8Array([9]));
    const f = frame(1);
    c.onData(f.subarray(0, 5));
    c.onData(new Uint8Array([...f.subarray(5), ...frame(2).subarray(0, 3)]));
    expect(peer.written).toEqual([[0, 1, 9]]);
    expect(t.list.filter((x) => x.ms === 2000).map((x) => x.live)).toEqual([false, true]);
  });

  test("idle: armed when nothing is read, pending or unwritten; not while an answer is awaited", async () => {
    let answer!: (r: Reply) => void;
    const { c, t, peer } = conn(() => new Promise<Reply>((r) => (answer = r)));
    expect(t.live()).toEqual([8000]);
    c.onData(frame(1));
    expect(t.live()).toEqual([]);
    answer(new Uint8Array([7]));
    await Bun.sleep(0);
    expect(t.live()).toEqual([8000]);
    t.fire(8000);
    expect(peer.events).toEqual(["end"]);
  });

  test("replies the kernel did not take are kept, written first on drain, in order; past the queue limit reading stops", () => {
    const { c, peer } = conn((m) => new Uint8Array(40).fill(m[0]!));
    peer.takes = 10;
    c.onData(new Uint8Array([...frame(1), ...frame(2)]));
    expect(peer.written.map((w) => w.length)).toEqual([10]); // the second reply waits behind the first's rest
    expect(peer.events).toEqual(["pause"]); // 32 + 42 bytes queued: past 64
    peer.takes = undefined;
    c.onDrain();
    expect(peer.written.map((w) => w.length)).toEqual([10, 32, 42]);
    expect(peer.written[2]![2]).toBe(2);
    expect(peer.events).toEqual(["pause", "resume"]);
  });

  test("a handler that throws or rejects: logged, that query dropped, the connection goes on", async () => {
    let n = 0;
    const { c, peer, errors } = conn(() => {
      n++;
      if (n === 1) throw new Error("boom");
      if (n === 2) return Promise.reject(new Error("later"));
      return new Uint8Array([5]);
    });
    c.onData(new Uint8Array([...frame(1), ...frame(2), ...frame(3)]));
    await Bun.sleep(0);
    expect(errors.map((e) => (e as Error).message)).toEqual(["boom", "later"]);
    expect(peer.written).toEqual([[0, 1, 5]]);
    expect(c.pending).toBe(0);
  });
});
