import { expect, test } from "bun:test";
import { isLoopback, lifecycleRoutes } from "../../src/envoy/routes.ts";
import type { LifecycleControl } from "../../src/lib/interfaces.ts";

function recorder(): LifecycleControl & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    quit: () => void calls.push("quit"),
    drain: async () => void calls.push("drain"),
  };
}

test("isLoopback", () => {
  for (const ip of ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "[::1]", "0:0:0:0:0:0:0:1"])
    expect({ ip, ok: isLoopback(ip) }).toEqual({ ip, ok: true });
  for (const ip of ["10.0.0.1", "::2", "fe80::1", "", undefined, "localhost"]) expect({ ip, ok: isLoopback(ip) }).toEqual({ ip, ok: false });
});

test("lifecycleRoutes: loopback POST only, 200 OK, then acts", async () => {
  const ctrl = recorder();
  const h = lifecycleRoutes(ctrl);
  const req = (path: string, method = "POST") => new Request(`http://x:15020${path}`, { method });
  expect(h(req("/healthz/ready", "GET"), "127.0.0.1")).toBeUndefined();
  const remote = h(req("/quitquitquit"), "10.1.2.3")!;
  expect(remote.status).toBe(403);
  expect(h(req("/drain"), undefined)!.status).toBe(403);
  expect(h(req("/quitquitquit", "GET"), "127.0.0.1")!.status).toBe(405);
  await Bun.sleep(1);
  expect(ctrl.calls).toEqual([]);
  const ok = h(req("/drain"), "::1")!;
  expect(ok.status).toBe(200);
  expect(await ok.text()).toBe("OK");
  expect(h(req("/quitquitquit"), "127.0.0.1")!.status).toBe(200);
  await Bun.sleep(1);
  expect(ctrl.calls).toEqual(["drain", "quit"]);
});

test("lifecycleRoutes mounted on a real Bun server", async () => {
  const ctrl = recorder();
  const h = lifecycleRoutes(ctrl);
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req, srv) => h(req, srv.requestIP(req)?.address) ?? new Response("not found", { status: 404 }),
  });
  try {
    const res = await fetch(`http://127.0.0.1:${server.port}/quitquitquit`, { method: "POST" });
    expect(res.status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${server.port}/other`)).status).toBe(404);
    await Bun.sleep(5);
    expect(ctrl.calls).toEqual(["quit"]);
  } finally {
    server.stop(true);
  }
});
