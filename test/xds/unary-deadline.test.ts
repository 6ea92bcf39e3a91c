// A unary call's deadline (the CA client's CSR) does not count time the agent did not run. Here the
// clock reports that the deadline's timer ran 400 ms late, as after a stall of the agent's event
// loop; the CA answers 300 ms after the request. A deadline on wall time alone fails the call at
// 200 ms (DEADLINE_EXCEEDED, and the CA client would send a second CSR); the stall-tolerant one
// grants the lost time again (at most the 200 ms budget), so the answer is read. With no stall
// reported, the same call still fails at its deadline.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { UnaryChannel, GrpcCallError } from "../../src/xds/unary.ts";
import { ScriptedCa, reply, frame } from "../ca/scripted-ca.ts";

let ca: ScriptedCa;
beforeAll(async () => {
  ca = await ScriptedCa.start();
  // 300 ms later, unless the client has given up on the stream by then (the no-stall case).
  ca.answer = (stream, req) => setTimeout(() => !stream.destroyed && !stream.closed && reply(frame(Buffer.from("pong")))(stream, req), 300);
});
afterAll(async () => ca.stop());

/** Real timers; `now()` jumps by `stallMs` the first time a timer runs (the agent was held meanwhile). */
function stalledClock(stallMs: number) {
  let offset = 0;
  let stalled = false;
  return {
    now: () => Date.now() + offset,
    timer(ms: number, fn: () => void) {
      const t = setTimeout(() => {
        if (!stalled) ((stalled = true), (offset += stallMs));
        fn();
      }, ms);
      return { cancel: () => clearTimeout(t) };
    },
  };
}

function channel(clock: ReturnType<typeof stalledClock>): UnaryChannel {
  return new UnaryChannel({ dial: () => connect(ca.port, "127.0.0.1"), scheme: "http", authority: ca.address, clock });
}

test("the deadline's timer ran late (a stall): the lost time is granted again and the CA's answer is read", async () => {
  const c = channel(stalledClock(400));
  const answer = await c.call("/istio.v1.auth.IstioCertificateService/CreateCertificate", [], new Uint8Array([1]), 200);
  expect(Buffer.from(answer).toString()).toBe("pong");
  c.close();
});

test("no stall: the same call fails at its 200 ms deadline", async () => {
  const c = channel(stalledClock(0));
  const e = await c.call("/istio.v1.auth.IstioCertificateService/CreateCertificate", [], new Uint8Array([1]), 200).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(GrpcCallError);
  expect((e as GrpcCallError).message).toBe("DEADLINE_EXCEEDED: Deadline exceeded after 200 ms");
  c.close();
  await Bun.sleep(200); // past the CA's delayed answer, which must find the stream gone and not throw
});
