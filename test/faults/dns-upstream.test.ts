// The DNS proxy of the compiled agent when its upstream resolver is black-holed (a UDP socket
// and a TCP listener that take queries and never answer) or refusing (nothing listens: ICMP port
// unreachable, TCP reset). What must hold: names outside the mesh get SERVFAIL within
// DNS_FORWARD_TIMEOUT (here 1 s) plus slack, over UDP and TCP; mesh names (from istiod's
// NameTable) are still answered meanwhile. The agent runs in its own mount namespace with a
// resolv.conf naming the test's upstream (127.x.y.z:53, as root), so the host's is untouched.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestPki, type FakeIstiod, type TestPki } from "../support/fake-istiod.ts";
import { describeRequiring } from "../support/requires.ts";
import { dig, startUpstream, type TestUpstream } from "../dns/helpers.ts";
import { DNS_POD_REQUIRES, MESH_IP, MESH_NAME, nameTableIstiod, privateLoopbackNet, startDnsPod } from "./dns-pod.ts";

const NET = privateLoopbackNet();

let work: string;
let istiod: FakeIstiod;
let pki: TestPki;
const cleanups: (() => void | Promise<void>)[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "agent-faults-dns-"));
  pki = makeTestPki(join(work, "pki"));
  istiod = await nameTableIstiod(pki);
});

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await istiod?.stop();
  rmSync(work, { recursive: true, force: true });
});

async function dnsPod(upstreamIp: string, listenIp: string) {
  const p = await startDnsPod({ work, pki, istiod, upstreamIp, listenIp });
  cleanups.push(p.close);
  return p;
}

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const v = await f();
  return [v, performance.now() - t0];
}

const figures: string[] = [];

describeRequiring(DNS_POD_REQUIRES, "DNS upstream faults (compiled agent)", () => {
  for (const kind of ["black-holed", "refusing"] as const) {
    test(`upstream ${kind}: SERVFAIL in time over UDP and TCP, mesh names still answered`, async () => {
      const upstreamIp = `${NET}.${kind === "black-holed" ? 1 : 2}`;
      let up: TestUpstream | undefined;
      if (kind === "black-holed") {
        up = await startUpstream({ host: upstreamIp, port: 53, silent: true });
        cleanups.push(() => up!.close());
      }
      const listenIp = `${NET}.${kind === "black-holed" ? 3 : 4}`;
      const { pod, port } = await dnsPod(upstreamIp, listenIp);
      // An outside name and a mesh name asked together: the mesh name must not wait for the upstream.
      const [[udp, udpMs], [mesh, meshMs]] = await Promise.all([
        timed(() => dig(port, "www.example.org", "A", [], listenIp)),
        timed(() => dig(port, MESH_NAME, "A", [], listenIp)),
      ]);
      const [tcp, tcpMs] = await timed(() => dig(port, "www.example.net", "A", ["+tcp"], listenIp));
      const [meshTcp] = await timed(() => dig(port, MESH_NAME, "A", ["+tcp"], listenIp));
      expect(udp.status).toBe("SERVFAIL");
      expect(tcp.status).toBe("SERVFAIL");
      expect(mesh.status).toBe("NOERROR");
      expect(mesh.data).toEqual([MESH_IP]);
      expect(meshTcp.data).toEqual([MESH_IP]);
      // dig waits 5 s; an answer at all means the agent answered first. The timeout is 1 s; the
      // bound leaves room for a loaded machine.
      expect(udpMs).toBeLessThan(4500);
      expect(tcpMs).toBeLessThan(4500);
      if (up) {
        // The queries did reach the black hole, over both protocols, and only outside names did.
        expect(up.received.udp).toBeGreaterThan(0);
        expect(up.received.tcp).toBeGreaterThan(0);
        expect(up.names.some((n) => n.startsWith("greeter.demo"))).toBe(false);
      }
      expect(pod.exitCode()).toBeNull();
      figures.push(
        `${kind}: SERVFAIL after ${udpMs.toFixed(0)} ms (UDP) / ${tcpMs.toFixed(0)} ms (TCP); mesh name answered in ${meshMs.toFixed(0)} ms meanwhile`,
      );
      console.log(`dns-upstream: ${figures.at(-1)}`);
    }, 60_000);
  }
});
