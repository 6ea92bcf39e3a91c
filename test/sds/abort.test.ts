// A file read for SDS stops when the requester goes away: the SDS stream's abort signal reaches
// the file reader (and its retry loop). Reads are shared by concurrent requesters, so the read
// stops only when every requester that came with a signal has gone; one without a signal (the
// agent's own warm-up) keeps it going.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalCa } from "../../src/ca/local.ts";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { FileSecrets } from "../../src/sds/filesecrets.ts";
import { SecretMetrics } from "../../src/sds/metrics.ts";
import { sdsCodec } from "../../src/sds/proto.ts";
import { SotwStream, type StreamCtx } from "../../src/sds/streams.ts";
import type { SecretItem } from "../../src/sds/item.ts";
import { FakeClock, until } from "./fake-clock.ts";

let dir: string;
let files: FileSecrets | undefined;
afterEach(() => {
  files?.close();
  rmSync(dir, { recursive: true, force: true });
});

function setup(): { clock: FakeClock; files: FileSecrets; missing: string } {
  dir = mkdtempSync(join(tmpdir(), "sds-abort-"));
  const clock = new FakeClock();
  files = new FileSecrets({
    log: silentLogger(),
    metrics: new SecretMetrics(newRegistry(), clock),
    clock,
    debounceMs: 100,
    retryTotalMs: 10_000,
    onUpdate: () => {},
  });
  return { clock, files, missing: join(dir, "ca.pem") };
}

type Outcome = { state: "pending" } | { state: "rejected"; err: Error } | { state: "resolved"; item: SecretItem };
function track(p: Promise<SecretItem>): { now(): Outcome } {
  let o: Outcome = { state: "pending" };
  p.then(
    (item) => (o = { state: "resolved", item }),
    (err: Error) => (o = { state: "rejected", err }),
  );
  return { now: () => o };
}

describe("SDS file reads stop when the requester goes away", () => {
  test("the only requester aborts: the read rejects and its retry timer is gone, the clock never moved", async () => {
    const { clock, files, missing } = setup();
    const ac = new AbortController();
    const r = track(files.root("file-root:x", missing, ac.signal));
    await until(() => clock.pending() === 1, "the first retry scheduled (the file is missing)");
    expect(r.now().state).toBe("pending");
    ac.abort(new Error("stream closed"));
    await until(() => r.now().state !== "pending", "the read to end");
    expect(r.now().state).toBe("rejected");
    expect(clock.pending()).toBe(0);
  });

  test("two requesters: the read goes on while one remains (the first leaving does not cut it)", async () => {
    const { clock, files, missing } = setup();
    const a = new AbortController();
    const b = new AbortController();
    const ra = track(files.root("file-root:x", missing, a.signal));
    const rb = track(files.root("file-root:x", missing, b.signal));
    await until(() => clock.pending() === 1, "the first retry scheduled");
    a.abort();
    clock.advance(100); // a retry runs: the read is still alive for b
    await until(() => clock.pending() === 1 && clock.nextAt()! > clock.now(), "the second retry scheduled");
    expect(rb.now().state).toBe("pending");
    writeFileSync(missing, (await LocalCa.generate()).rootPem);
    clock.advance(200);
    await until(() => rb.now().state !== "pending", "b's answer");
    expect(rb.now().state).toBe("resolved");
    expect(ra.now().state).toBe("resolved"); // a shared the read; its own leaving did not cut it
  });

  test("a requester without a signal keeps the read going after the others leave", async () => {
    const { clock, files, missing } = setup();
    const a = new AbortController();
    track(files.root("file-root:x", missing, a.signal));
    const pinned = track(files.root("file-root:x", missing));
    await until(() => clock.pending() === 1, "the first retry scheduled");
    a.abort();
    await Bun.sleep(0);
    expect(clock.pending()).toBe(1);
    writeFileSync(missing, (await LocalCa.generate()).rootPem);
    clock.advance(100);
    await until(() => pinned.now().state !== "pending", "the pinned requester's answer");
    expect(pinned.now().state).toBe("resolved");
  });

  test("an SDS stream passes a signal that aborts when the stream closes", async () => {
    const signals: AbortSignal[] = [];
    const ctx: StreamCtx = {
      codec: sdsCodec(),
      secrets: { get: (_n, signal) => (signal && signals.push(signal), new Promise<SecretItem>(() => {})), crlFor: () => undefined },
      log: silentLogger(),
      clock: new FakeClock(),
      nextVersion: () => "1",
    };
    const s = new SotwStream(ctx, { send: () => {}, fail: () => {} }, "t");
    s.onRequest({
      typeUrl: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
      resourceNames: ["file-root:/x"],
      versionInfo: "",
      responseNonce: "",
    });
    await until(() => signals.length === 1, "the secret asked for with a signal");
    expect(signals[0]!.aborted).toBe(false);
    s.close();
    expect(signals[0]!.aborted).toBe(true);
  });
});
