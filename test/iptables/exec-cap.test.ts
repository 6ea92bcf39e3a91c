// The command runner's output cap: exactly the cap is read, one byte more rejects and stops the
// command; a real process printing past the cap is killed and reported.

import { expect, test } from "bun:test";
import { MAX_COMMAND_OUTPUT_BYTES, readCapped, spawnExec } from "../../src/iptables/deps.ts";

function stream(chunks: string[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const s of chunks) c.enqueue(new TextEncoder().encode(s));
      c.close();
    },
  });
}

test("output of exactly the cap is read whole, across chunk boundaries", async () => {
  let overflowed = false;
  expect(await readCapped(stream(["abc", "de"]), 5, "nft", () => (overflowed = true))).toBe("abcde");
  expect(overflowed).toBe(false);
});

test("one byte past the cap rejects, naming the command, and calls onOverflow once", async () => {
  let overflows = 0;
  await expect(readCapped(stream(["abc", "def", "ghi"]), 5, "nft", () => overflows++)).rejects.toThrow("nft printed more than 5 bytes");
  expect(overflows).toBe(1);
});

test("spawnExec: a command printing past the cap is stopped and the call rejects", async () => {
  const started = performance.now();
  await expect(spawnExec("sh", ["-c", `head -c ${MAX_COMMAND_OUTPUT_BYTES + 1} /dev/zero; sleep 30`])).rejects.toThrow(
    `sh printed more than ${MAX_COMMAND_OUTPUT_BYTES} bytes`,
  );
  expect(performance.now() - started).toBeLessThan(20_000);
}, 25_000);
