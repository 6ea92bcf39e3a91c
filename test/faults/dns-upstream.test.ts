// The DNS proxy of the compiled agent when its upstream resolver is black-holed (a UDP socket
// and a TCP listener that take queries and never answer) or refusing (nothing listens: ICMP port
// unreachable, TCP reset). What must hold: names outside the mesh get SERVFAIL within
// DNS_FORWARD_TIMEOUT (here 1 s) plus slack, over UDP and TCP; mesh names (from istiod's
// NameTable) are still answered meanwhile. The agent runs in its own mount namespace with a
// resolv.conf naming the test's upstream (127.x.y.z:53, as root), so the host's is untouched.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { FakeIstiod, makeTestPki, type TestPki } from "../support/fake-istiod.ts";
import { describeRequiring } from "../support/requires.ts";
import { freePort, startPod, until, type Pod } from "../e2e/pod.ts";
import { EnvoyClient, LDS } from "../xds/harness.ts";
import { dig, startUpstream, type TestUpstream } from "../dns/helpers.ts";
import { nameInfo, nameTableCodec } from "../../src/dns/nametable.ts";
import { NAME_TABLE_TYPE } from "../../src/xds/types.ts";

const MESH_NAME = "greeter.demo.svc.cluster.local";
const MESH_IP = "10.9.8.7";
// A loopback /24 of our own for this run, so parallel runs do not meet on port 53.
const NET = `127.${50 + Math.floor(Math.random() * 150)}.${1 + Math.floor(Math.random() * 250)}`;

let work: string;
let istiod: FakeIstiod;
let pki: TestPki;
const cleanups: (() => void | Promise<void>)[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "agent-faults-dns-"));
  pki = makeTestPki(join(work, "pki"));
  istiod = new FakeIstiod({ pki });
  const table = Buffer.from(
    nameTableCodec().encode({ table: { [MESH_NAME]: nameInfo({ ips: [MESH_IP], registry: "Kubernetes", shortname: "greeter", namespace: "demo" }) } }),
  );
  // istiod answers Envoy's LDS request and sends the NameTable once the agent asks for it (the
  // agent adds that subscription on Envoy's first Listener request, as Istio's does).
  istiod.onStream = (s) => {
    let sent = false;
    s.call.on("data", () => {
      const r = s.requests[s.requests.length - 1]!;
      if (r.typeUrl === LDS && !r.responseNonce) s.send({ typeUrl: LDS, versionInfo: "1", resources: [] });
      if (r.typeUrl === NAME_TABLE_TYPE && !sent) {
        sent = true;
        s.send({ typeUrl: NAME_TABLE_TYPE, versionInfo: "1", resources: [{ typeUrl: NAME_TABLE_TYPE, value: table }] });
      }
    });
  };
  await istiod.start();
});

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await istiod?.stop();
  rmSync(work, { recursive: true, force: true });
});

async function dnsPod(upstreamIp: string, listenIp: string): Promise<{ pod: Pod; port: number }> {
  const rc = join(work, `resolv-${upstreamIp}.conf`);
  writeFileSync(rc, `nameserver ${upstreamIp}\nsearch demo.svc.cluster.local svc.cluster.local cluster.local\n`);
  const port = await freePort();
  const pod = await startPod({
    prefix: ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', rc],
    env: {
      DISABLE_ENVOY: "true",
      CA_PROVIDER: "local",
      ISTIOD_SAN: "istiod.istio-system.svc",
      ISTIO_META_DNS_CAPTURE: "true",
      DNS_PROXY_ADDR: `${listenIp}:${port}`,
      DNS_FORWARD_TIMEOUT: "1s",
    },
    proxyConfig: { discoveryAddress: istiod.address, controlPlaneAuthPolicy: "MUTUAL_TLS" },
    files: { "var/run/secrets/tokens/istio-token": "t\n", "var/run/secrets/istio/root-cert.pem": readFileSync(pki.caCert, "utf8") },
  });
  cleanups.push(() => {
    pod.kill();
    pod.box.cleanup();
  });
  // The XDS proxy dials istiod on Envoy's first request; the NameTable rides that connection.
  await until(pod, "XDS socket", () => (existsSync(pod.path("etc/istio/proxy/XDS")) ? true : undefined));
  const envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
  envoy.send({ typeUrl: LDS });
  cleanups.push(() => envoy.close());
  await until(
    pod,
    `${MESH_NAME} answered from the NameTable`,
    async () => {
      const r = await dig(port, MESH_NAME, "A", [], listenIp);
      return r.data.includes(MESH_IP) ? true : undefined;
    },
    20_000,
  );
  return { pod, port };
}

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const v = await f();
  return [v, performance.now() - t0];
}

const figures: string[] = [];

describeRequiring({ root: true, tools: ["dig", "unshare", "mount"], apt: ["dnsutils", "util-linux", "mount"] }, "DNS upstream faults (compiled agent)", () => {
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
