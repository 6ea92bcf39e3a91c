// The log line of a connection the XDS/SDS server closed for abuse (GOAWAY ENHANCE_YOUR_CALM): it
// names the peer from SO_PEERCRED (also when XDS_AUTHORIZED_UIDS=* means the authorizer never read
// it, as in proxyless mode) and the limit, and it is rate-limited: 10 lines per 10 s, the next one
// written after that carries how many were suppressed.
import { afterEach, describe, expect, test } from "bun:test";
import { PeerAuthorizer } from "../../src/lib/peerauth.ts";
import { startGrpcServer, type GrpcServerHarness } from "./grpc-server-support.ts";
import { CLIENT_PREFACE, RawPeer, T, rawFrame, settings } from "./h2-support.ts";

const harnesses: GrpcServerHarness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.stop();
});

const WHO = `pid=${process.pid} uid=${process.getuid?.() ?? 0}`;
const LIMIT = "more than 1 consecutive empty HEADERS/CONTINUATION/DATA frames";

/** One connection that sends two empty CONTINUATIONs on an open header block, closed by the server. */
async function abuse(h: GrpcServerHarness): Promise<void> {
  const p = await RawPeer.connect(h.path, { preface: false });
  p.send(CLIENT_PREFACE, settings(), rawFrame(T.HEADERS, 0, 1, Buffer.from([0x82])), rawFrame(T.CONTINUATION, 0, 1), rawFrame(T.CONTINUATION, 0, 1));
  expect((await p.goaway()).debug).toBe(LIMIT);
  await p.waitClosed();
}

describe("connections closed for abuse: the log line", () => {
  test("names the peer (SO_PEERCRED read even when any UID is allowed) and the limit, at warn", async () => {
    const h = startGrpcServer({ authorizer: new PeerAuthorizer("*", 0), now: () => 0 });
    harnesses.push(h);
    await abuse(h);
    for (let i = 0; i < 100 && !h.lines.some((l) => l.includes("closed (GOAWAY")); i++) await Bun.sleep(10);
    expect(h.lines.filter((l) => l.includes("closed (GOAWAY"))).toEqual([
      expect.stringMatching(new RegExp(`\\twarn\\tTEST connection from ${WHO} closed \\(GOAWAY ENHANCE_YOUR_CALM\\): ${LIMIT}$`)),
    ]);
  });

  test("10 lines per 10 s; the first line of the next window says how many were suppressed", async () => {
    let now = 0;
    const h = startGrpcServer({ now: () => now });
    harnesses.push(h);
    for (let i = 0; i < 13; i++) await abuse(h);
    const abuseLines = () => h.lines.filter((l) => l.includes("closed (GOAWAY"));
    // Each connection's close is logged once its socket is gone: wait for the 10th line, then a
    // sentinel connection that closes cleanly (logged by nobody) orders the rest before the check.
    for (let i = 0; i < 100 && abuseLines().length < 10; i++) await Bun.sleep(10);
    const c = await h.connect();
    c.peer.destroy();
    await c.peer.waitClosed();
    expect(abuseLines().length).toBe(10);
    now = 10_000;
    await abuse(h);
    for (let i = 0; i < 100 && abuseLines().length < 11; i++) await Bun.sleep(10);
    expect(abuseLines().length).toBe(11);
    expect(abuseLines()[10]).toMatch(/suppressed=3/);
  });
});
