// The HTTP/2 writer's data path: DATA frames carrying several queued pieces (a gRPC prefix and
// its message's first chunk in one frame), frames cut at the peer's SETTINGS_MAX_FRAME_SIZE across
// piece boundaries, writes to the socket bounded to one batch, large pieces handed over uncopied,
// and a slow reader: the socket is given no more than it accepts, the rest waits for its drain.

import { expect, test } from "bun:test";
import { Duplex } from "node:stream";
import { H2Session, type H2Stream } from "../../src/xds/h2/session.ts";
import { CLIENT_PREFACE, F, S, T, headersFrame, parseFrames, settings, windowUpdate, type RawFrame } from "./h2-support.ts";

/** A socket whose reader is slow: it accepts one write, then holds the rest until `release()`. */
class SlowSocket extends Duplex {
  /** Every chunk handed to the socket, in order (the objects themselves). */
  readonly handed: Uint8Array[] = [];
  /** Bytes the reader has taken. */
  accepted = 0;
  private held: (() => void)[] = [];
  constructor(private readonly slow: boolean) {
    super({ writableHighWaterMark: 1 });
  }
  override _read(): void {}
  override _write(chunk: Uint8Array, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.handed.push(chunk);
    const done = () => {
      this.accepted += chunk.length;
      cb();
    };
    if (this.slow) this.held.push(done);
    else done();
  }
  /** The reader takes the oldest held write. */
  release(): boolean {
    const next = this.held.shift();
    next?.();
    return next !== undefined;
  }
  feed(chunk: Uint8Array): void {
    this.emit("data", Buffer.from(chunk));
  }
  frames(): RawFrame[] {
    return parseFrames(Buffer.concat(this.handed.map((c) => Buffer.from(c.buffer, c.byteOffset, c.length))));
  }
  handedBytes(): number {
    return this.handed.reduce((n, c) => n + c.length, 0);
  }
}

const tick = () => new Promise((r) => setTimeout(r, 0));

/** A server session with one open stream 1; the peer's SETTINGS as given, windows opened wide. */
async function serverStream(sock: SlowSocket, peerSettings: [number, number][]): Promise<H2Stream> {
  let stream: H2Stream | undefined;
  new H2Session(sock, { role: "server", onStream: (st) => (stream = st) });
  sock.feed(Buffer.concat([CLIENT_PREFACE, settings(...peerSettings), windowUpdate(0, 64 << 20), headersFrame(1)]));
  await tick();
  expect(stream).toBeDefined();
  stream!.respond([[":status", "200"]]);
  return stream!;
}

const dataFrames = (s: SlowSocket) => s.frames().filter((f) => f.type === T.DATA && f.stream === 1);

test("a gRPC prefix and its first chunk written together go out as one DATA frame", async () => {
  const sock = new SlowSocket(false);
  const st = await serverStream(sock, [[S.INITIAL_WINDOW_SIZE, 1 << 20]]);
  const prefix = Buffer.from([0, 0, 0, 0, 100]);
  const body = Buffer.alloc(100, 7);
  expect(st.writev(prefix, body)).toBe(true);
  await tick();
  const data = dataFrames(sock);
  expect(data.map((f) => f.payload.length)).toEqual([105]);
  expect(data[0]!.payload.toString("hex")).toBe("0000000064" + "07".repeat(100));
});

test("DATA frames are cut at the peer's max frame size across piece boundaries; the bytes are the pieces in order", async () => {
  const sock = new SlowSocket(false);
  const st = await serverStream(sock, [[S.INITIAL_WINDOW_SIZE, 1 << 20]]); // max frame stays 16384
  const pieces = [Buffer.alloc(5, 1), Buffer.alloc(20_000, 2), Buffer.alloc(3, 3), Buffer.alloc(16_379, 4), Buffer.alloc(1, 5)];
  st.writev(pieces[0]!, pieces[1]!);
  st.write(pieces[2]!);
  st.writev(pieces[3]!, pieces[4]!);
  st.end([["grpc-status", "0"]]);
  await tick();
  const data = dataFrames(sock);
  // Each write is framed when made: 5 + 20000 -> 16384 (the prefix and 16379 of the chunk) and the
  // chunk's last 3621; the lone 3; then 16379 + 1 together.
  expect(data.map((f) => f.payload.length)).toEqual([16_384, 3_621, 3, 16_380]);
  expect(Buffer.concat(data.map((f) => f.payload)).equals(Buffer.concat(pieces))).toBe(true);
  const last = sock.frames().at(-1)!;
  expect([last.type, last.flags & F.END_STREAM]).toEqual([T.HEADERS, F.END_STREAM]);
});

test("socket writes are at most 128 KiB; a piece of 128 KiB or more is handed over as it is, not copied", async () => {
  const sock = new SlowSocket(false);
  const st = await serverStream(sock, [
    [S.INITIAL_WINDOW_SIZE, 16 << 20],
    [S.MAX_FRAME_SIZE, 16_777_215],
  ]);
  const big = Buffer.alloc(300 * 1024, 9);
  const small = Array.from({ length: 40 }, (_, i) => Buffer.alloc(16 * 1024, i));
  for (const s of small) st.write(s); // 640 KiB in 16 KiB pieces: copied together into batches
  st.write(big);
  await tick();
  const sizes = sock.handed.map((c) => c.length);
  expect(sizes.filter((n) => n > 128 * 1024)).toEqual([300 * 1024]);
  expect(sock.handed.some((c) => c.buffer === big.buffer && c.byteOffset === big.byteOffset && c.length === big.length)).toBe(true);
  const body = Buffer.concat(dataFrames(sock).map((f) => f.payload));
  expect(body.equals(Buffer.concat([...small, big]))).toBe(true);
});

test("slow reader: the socket holds at most its budget and one batch beyond what it accepted; the rest goes on drain, in order", async () => {
  const sock = new SlowSocket(true);
  const st = await serverStream(sock, [[S.INITIAL_WINDOW_SIZE, 16 << 20]]);
  while (sock.release()) await tick(); // the SETTINGS and headers written so far
  const payload = Buffer.alloc(2 << 20);
  for (let i = 0; i < payload.length; i += 4) payload.writeUInt32BE(i, i);
  let drained = 0;
  let wake: (() => void) | undefined;
  st.handlers.onDrain = () => {
    drained++;
    wake?.();
  };
  // The relay writes chunks as they arrive from istiod (64 KiB each here; one large socket read of
  // istiod's carries many DATA frames, so 16 writes in one event-loop turn) and stops
  // when told to, until onDrain.
  const results: boolean[] = [];
  let producing = true;
  const producer = (async () => {
    for (let i = 0; i < payload.length;) {
      // One turn: what one socket read of istiod's delivered, written whatever write() says
      // (the relay pauses the source, it cannot unread bytes it already has).
      const before = drained;
      let ok = true;
      for (let k = 0; k < 16 && i < payload.length; k++, i += 64 * 1024) {
        ok = st.write(payload.subarray(i, i + 64 * 1024));
        results.push(ok);
      }
      await tick();
      if (!ok && drained === before) await new Promise<void>((r) => (wake = r));
    }
    producing = false;
  })();
  while (producing || sock.release()) {
    // Never more handed to the socket than it took plus its budget (256 KiB) and one batch.
    expect(sock.handedBytes() - sock.accepted).toBeLessThanOrEqual(256 * 1024 + 128 * 1024);
    sock.release();
    await tick();
  }
  await producer;
  expect(Math.max(...sock.handed.map((c) => c.length))).toBeLessThanOrEqual(128 * 1024);
  const body = Buffer.concat(dataFrames(sock).map((f) => f.payload));
  expect(body.length).toBe(payload.length);
  expect(body.equals(payload)).toBe(true);
  expect(results.includes(false)).toBe(true); // the writer was told to wait
  expect(drained).toBeGreaterThanOrEqual(1); // and told when to go on
});

test("graceful close with a full socket: the socket ends only after everything queued was handed over", async () => {
  const sock = new SlowSocket(true);
  let session!: H2Session;
  let stream: H2Stream | undefined;
  session = new H2Session(sock, { role: "server", onStream: (st) => (stream = st) });
  sock.feed(Buffer.concat([CLIENT_PREFACE, settings([S.INITIAL_WINDOW_SIZE, 16 << 20]), windowUpdate(0, 64 << 20), headersFrame(1)]));
  await tick();
  stream!.respond([[":status", "200"]]);
  const payload = Buffer.alloc(1 << 20, 3);
  stream!.write(payload);
  stream!.end([["grpc-status", "0"]]);
  session.close(10_000);
  let ended = false;
  sock.on("finish", () => (ended = true));
  await tick();
  while (sock.release()) await tick();
  await tick();
  expect(Buffer.concat(dataFrames(sock).map((f) => f.payload)).length).toBe(payload.length);
  const frames = sock.frames();
  expect(frames.some((f) => f.type === T.HEADERS && f.stream === 1 && (f.flags & F.END_STREAM) !== 0)).toBe(true);
  expect(ended).toBe(true);
});
