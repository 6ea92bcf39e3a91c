// App probes with the status port on its own thread (src/status/statusthread.ts): the thread
// answers /app-health/ and /app-lifecycle/ itself, with the same answers, sources, headers and log
// lines as the in-loop listener (the suite: appprobes-suite.ts), and while the agent's event loop
// is held.
import { expect } from "bun:test";
import { silentLogger } from "../../src/lib/log.ts";
import { newRegistry } from "../../src/lib/metrics.ts";
import { StatusServer } from "../../src/status/server.ts";
import { threadListen } from "../../src/status/statusthread.ts";
import { curlWhileHeld } from "../support/curl-while-held.ts";
import { testRequiring } from "../support/requires.ts";
import { appProbeSuite } from "./appprobes-suite.ts";

appProbeSuite((onError) => threadListen(onError));

/** An HTTP app in a process of its own (this one's event loop is about to be held). */
async function appProcess(): Promise<{ port: number; stop(): Promise<void> }> {
  const p = Bun.spawn(
    [process.execPath, "-e", 'const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("app ok") }); console.log(s.port);'],
    {
      stdout: "pipe",
    },
  );
  const reader = (p.stdout as ReadableStream<Uint8Array>).getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`app process exited: ${out}`);
    out += new TextDecoder().decode(value);
  }
  return {
    port: Number(out.trim()),
    stop: async () => {
      p.kill();
      await p.exited;
    },
  };
}

testRequiring({ tools: ["curl"], apt: ["curl"] }, "an app probe is answered while the agent's event loop is held for 1.5 s", async () => {
  const app = await appProcess();
  const ac = new AbortController();
  const s = new StatusServer({
    port: 0,
    hostname: "127.0.0.1",
    log: silentLogger(),
    registry: newRegistry(),
    probeDestination: "127.0.0.1",
    appProbers: JSON.stringify({ "/app-health/web/livez": { httpGet: { path: "/", port: app.port } } }),
    listen: threadListen(() => {}),
  });
  await s.start(ac.signal);
  try {
    const url = `http://127.0.0.1:${s.port()}/app-health/web/livez`;
    expect((await fetch(url)).status).toBe(200);
    // curl (another process) probes while this thread is busy; the main thread would answer after the loop frees.
    const { body, code, seconds } = await curlWhileHeld(url);
    expect([body, code]).toEqual(["app ok", "200"]);
    expect(seconds).toBeLessThan(0.5);
  } finally {
    ac.abort();
    await s.stopped();
    await app.stop();
  }
});
