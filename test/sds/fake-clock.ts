// The SDS tests' clock (the shared manual one) and a bounded wait for promises and I/O to settle.

export { ManualClock as FakeClock } from "../../src/lib/clock.ts";

/** Let promises and I/O settle until `cond` holds (real time, bounded). */
export async function until(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
