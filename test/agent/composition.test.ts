// The composition root itself, in-process (test/support/agent.ts): the order it starts components
// in, what `start` returns (Bound), what it does when a component cannot start, and the order it
// stops them in. The order is read from the root's own debug lines (`<name>: starting`, ...), and
// the effects from the outside: sockets, the status port, exit codes.

import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ComponentError } from "../../src/lib/component.ts";
import { logged, startTestAgent, type TestAgent } from "../support/agent.ts";

const agents: TestAgent[] = [];
afterEach(async () => {
  for (const a of agents.splice(0)) await a.cleanup();
});

async function agent(opts: Parameters<typeof startTestAgent>[0] = {}): Promise<TestAgent> {
  const a = await startTestAgent(opts);
  agents.push(a);
  return a;
}

const LIFECYCLE = /^[\w-]+: (starting|started|stopping|stopped)$/;

async function statusAnswers(port: number): Promise<number | string> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/healthz/ready`, { signal: AbortSignal.timeout(2000) })).status;
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
}

describe("the composition root", () => {
  test("starts the components in the declared order and returns what it bound, frozen", async () => {
    const a = await agent({
      env: { ISTIO_META_DNS_CAPTURE: "true" },
      deps: { listen: { status: { hostname: "127.0.0.1", port: 0 }, dns: [{ host: "127.0.0.1", port: 0 }] } },
    });
    const bound = await a.start;
    // Each start is asked for in Istio's order (status, DNS, SDS, xDS relay, then the Wasm
    // conversion's ECDS hook) without waiting for the previous socket; "started" lines come as each finishes.
    expect(logged(a.lines, /: starting$/)).toEqual(["status: starting", "dns: starting", "sds: starting", "xdsproxy: starting", "wasm: starting"]);
    expect(logged(a.lines, /: started$/).sort()).toEqual(["dns: started", "sds: started", "status: started", "wasm: started", "xdsproxy: started"]);

    expect(bound.status?.hostname).toBe("127.0.0.1");
    expect(bound.status!.port).toBeGreaterThan(0);
    expect(await statusAnswers(bound.status!.port)).toBe(503); // serving (the DNS table has not arrived)
    expect(bound.xdsSocket).toBe(join(a.root, "etc/istio/proxy/XDS"));
    expect(statSync(bound.xdsSocket!).isSocket()).toBe(true);
    expect(bound.sdsSocket).toBeUndefined(); // proxyless: no Envoy to serve SDS to
    expect(bound.dns.map((d) => [d.protocol, d.host])).toEqual([
      ["udp", "127.0.0.1"],
      ["tcp", "127.0.0.1"],
    ]);
    expect(bound.dns[0]!.port).toBeGreaterThan(0);
    expect(bound.dns[1]!.port).toBe(bound.dns[0]!.port);

    expect(Object.isFrozen(bound)).toBe(true);
    expect(Object.isFrozen(bound.status)).toBe(true);
    expect(Object.isFrozen(bound.dns)).toBe(true);
    expect(() => {
      (bound as { xdsSocket?: string }).xdsSocket = "/elsewhere";
    }).toThrow(TypeError);
  });

  test("what is off is absent from Bound: no status server at status port 0 (annotation), no DNS proxy", async () => {
    const a = await agent({ files: { "etc/istio/pod/annotations": 'status.sidecar.istio.io/port="0"' } });
    const bound = await a.start;
    expect(bound.status).toBeUndefined();
    expect(bound.dns).toEqual([]);
    expect(logged(a.lines, /: starting$/)).toEqual(["sds: starting", "xdsproxy: starting", "wasm: starting"]);
    expect(logged(a.lines, /status server disabled/)).toEqual(["status server disabled (statusPort 0)"]);
  });

  test("a component that cannot start: the started ones are stopped in reverse order, the error names it, exit 255", async () => {
    // A directory where the XDS socket goes: the relay cannot listen there.
    const a = await agent({ files: { "etc/istio/proxy/XDS/keep": "" } });
    const err = await a.start.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ComponentError);
    expect((err as ComponentError).component).toBe("xdsproxy");
    expect((err as ComponentError).message).toStartWith(`xdsproxy: xds proxy downstream: preparing socket ${join(a.root, "etc/istio/proxy/XDS")}: `);
    expect(await a.agent.done).toBe(255);
    const failure = logged(a.lines, /agent failed to start/);
    expect(failure).toHaveLength(1);
    expect(failure[0]).toStartWith(`agent failed to start: xdsproxy: xds proxy downstream: preparing socket ${join(a.root, "etc/istio/proxy/XDS")}: `);
    expect(failure[0]).toEndWith("\tcomponent=xdsproxy");
    // The others had started; they were stopped, the later one first, each before the next.
    expect(logged(a.lines, LIFECYCLE).filter((l) => /stopp/.test(l))).toEqual([
      "wasm: stopping",
      "wasm: stopped",
      "sds: stopping",
      "sds: stopped",
      "status: stopping",
      "status: stopped",
    ]);
    expect(logged(a.lines, LIFECYCLE)).not.toContain("xdsproxy: started");
    // And they are really gone: the status port is closed.
    const statusLine = logged(a.lines, /Opening status port/)[0]!;
    expect(await statusAnswers(Number(statusLine.split(" ").pop()))).toBe("ECONNREFUSED");
  });

  test("a component that cannot be built names itself too (a bad ISTIO_KUBE_APP_PROBERS: the status server)", async () => {
    const a = await agent({ env: { ISTIO_KUBE_APP_PROBERS: "{not json" } });
    const err = (await a.start.catch((e: unknown) => e)) as ComponentError;
    expect(err.component).toBe("status");
    expect(err.message).toStartWith("status: ISTIO_KUBE_APP_PROBERS: failed to decode app prober config");
    expect(await a.agent.done).toBe(255);
    expect(logged(a.lines, LIFECYCLE)).toEqual([]);
  });

  test("stops the components in the reverse of their start order, each awaited before the next; exit 0", async () => {
    const a = await agent();
    await a.start;
    expect(await a.stop()).toBe(0);
    const lines = logged(a.lines);
    const stops = lines.filter((l) => LIFECYCLE.test(l) && /stopp/.test(l));
    expect(stops).toEqual([
      "wasm: stopping",
      "wasm: stopped",
      "xdsproxy: stopping",
      "xdsproxy: stopped",
      "sds: stopping",
      "sds: stopped",
      "status: stopping",
      "status: stopped",
    ]);
    // The status server's own last line comes between the root's two lines for it.
    const own = lines.indexOf("status\tStatus server has successfully terminated");
    expect(own).toBeGreaterThan(lines.indexOf("status: stopping"));
    expect(own).toBeLessThan(lines.indexOf("status: stopped"));
    expect(lines.indexOf("Agent stopped")).toBeGreaterThan(lines.indexOf("status: stopped"));
  });

  test("with Envoy: Envoy is started last and stops first, then the others in reverse order", async () => {
    const a = await agent({ envoy: true });
    const bound = await a.start;
    expect(logged(a.lines, /: starting$/)).toEqual(["status: starting", "sds: starting", "xdsproxy: starting", "wasm: starting"]);
    const lines = () => logged(a.lines);
    for (const name of ["status", "sds", "xdsproxy", "wasm"])
      expect(lines().indexOf("Starting proxy agent")).toBeGreaterThan(lines().indexOf(`${name}: started`));
    expect(bound.xdsSocket).toBe(join(a.root, "etc/istio/proxy/XDS"));
    expect(bound.sdsSocket).toBe(join(a.root, "var/run/secrets/workload-spiffe-uds/socket"));
    expect(statSync(bound.sdsSocket!).isSocket()).toBe(true);
    expect(await a.stop()).toBe(0);
    // The fake Envoy was started once and told to stop by the agent.
    expect(
      a
        .envoyRecords()
        .map((r) => r.event)
        .filter((e) => e === "start" || e === "exit"),
    ).toEqual(["start", "exit"]);
    expect(existsSync(bound.sdsSocket!)).toBe(false);
    const l = lines();
    const envoyExit = l.findIndex((m) => /^envoy\tEnvoy \(pid \d+\) exited normally$/.test(m));
    expect(envoyExit).toBeGreaterThan(-1);
    expect(l.indexOf("wasm: stopping")).toBeGreaterThan(envoyExit);
    expect(l.filter((m) => LIFECYCLE.test(m) && /stopp/.test(m))).toEqual([
      "wasm: stopping",
      "wasm: stopped",
      "xdsproxy: stopping",
      "xdsproxy: stopped",
      "sds: stopping",
      "sds: stopped",
      "status: stopping",
      "status: stopped",
    ]);
  }, 20_000);
});

test("local mode: the file-backed xDS server starts before the relay that dials it, and stops after it", async () => {
  const xds = readFileSync(join(import.meta.dir, "../../examples/xds.yaml"), "utf8");
  const a = await agent({ env: { LOCAL_XDS_PATH: "xds.yaml" }, files: { "xds.yaml": xds } });
  await a.start;
  expect(await a.stop()).toBe(0);
  const lifecycle = logged(a.lines, LIFECYCLE);
  expect(lifecycle.filter((l) => l.startsWith("localxds") || l.startsWith("xdsproxy"))).toEqual([
    "localxds: starting",
    "localxds: started",
    "xdsproxy: starting",
    "xdsproxy: started",
    "xdsproxy: stopping",
    "xdsproxy: stopped",
    "localxds: stopping",
    "localxds: stopped",
  ]);
});

test("files given to the helper reach the real loader (pod labels from the downward API)", async () => {
  const a = await agent({ files: { "etc/istio/pod/labels": 'app="web"\nversion="v1"' } });
  await a.start;
  expect(a.agent.config.labels).toEqual({ app: "web", version: "v1" });
});
