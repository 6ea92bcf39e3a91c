// bench/idle.ts counts wake-ups as context switches of every thread. A thread that ends during
// the window (Bun's JIT workers and GC helpers do, after start-up) must still count, and the count
// can never go negative: the counter keeps each thread's last reading.

import { expect, test } from "bun:test";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readdirSync, readFileSync } from "node:fs";
import { switchCounter, wakeups } from "../../bench/procstat.ts";

const CHILD = `
const worker = () => {
  // 40 timed futex waits of 5 ms on a thread of its own: at least 40 voluntary context switches.
  const a = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 40; i++) Atomics.wait(a, 0, 0, 5);
  postMessage("waited");
  // Alive until terminated: a worker whose script has ended with nothing pending may exit at once,
  // before the test has looked for its thread (seen on an idle machine).
  setInterval(() => {}, 1 << 30);
};
console.log("ready");
await Bun.sleep(300);
const w = new Worker(URL.createObjectURL(new Blob(["(" + worker.toString() + ")()"])));
await new Promise((r) => (w.onmessage = r));
// The worker has done its waits and is still alive: the test reads it now, then says "go".
console.log("waited");
for await (const line of console) if (line.trim() === "go") break;
await w.terminate();
await Bun.sleep(300); // the worker thread has gone
console.log("done");
await Bun.sleep(60_000);
`;

/** Whether `pid` still has the thread Bun names "Worker". */
function workerThreadAlive(pid: number): boolean {
  return readdirSync(`/proc/${pid}/task`).some((t) => {
    try {
      return readFileSync(`/proc/${pid}/task/${t}/comm`, "utf8").trim() === "Worker";
    } catch {
      return false;
    }
  });
}

test("a thread that starts and ends inside the window is counted, and its switches are not lost", async () => {
  const file = join(tmpdir(), `switch-counter-child-${process.pid}.ts`);
  await Bun.write(file, CHILD);
  const child = Bun.spawn([process.execPath, file], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  let counter: ReturnType<typeof switchCounter> | undefined;
  try {
    const reader = (child.stdout as ReadableStream<Uint8Array>).getReader();
    let out = "";
    const until = async (word: string) => {
      while (!out.includes(word)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`child exited before "${word}": ${out}`);
        out += new TextDecoder().decode(value);
      }
    };
    await until("ready");
    const before = wakeups(child.pid);
    counter = switchCounter(child.pid, 20);
    await until("waited");
    // One reading while the worker thread lives, whatever the machine's load did to the interval:
    // its (at least 40) switches are in it.
    expect(workerThreadAlive(child.pid)).toBe(true);
    counter.sample();
    child.stdin!.write("go\n");
    child.stdin!.flush();
    await until("done"); // the sentinel: printed after the worker has been terminated
    // ... and its thread ("Worker") has left /proc (under load that can trail the terminate).
    for (let i = 0; i < 60 && workerThreadAlive(child.pid); i++) await Bun.sleep(50);
    expect(workerThreadAlive(child.pid)).toBe(false);
    const counted = counter.stop();
    counter = undefined;
    const plainDifference = wakeups(child.pid) - before;
    // A difference of two sums loses the ended worker thread's (at least 40) switches; the
    // counter keeps them on top of what every thread still alive did.
    expect(counted - plainDifference).toBeGreaterThanOrEqual(40);
  } finally {
    // A failed expectation must not leave the sampling timer reading a process that is gone: it
    // threw in later files and took a whole file's tests with it ("Cannot call describe() after
    // the test run has completed").
    if (counter) clearCounter(counter);
    child.kill("SIGKILL");
    await child.exited;
    await Bun.file(file).delete();
  }
});

function clearCounter(c: ReturnType<typeof switchCounter>): void {
  try {
    c.stop();
  } catch {
    // the child may already be gone; stopping is all that matters here
  }
}
