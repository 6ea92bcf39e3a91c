// The pod the DNS fault cases start: the compiled agent in proxyless mode with DNS capture, in a
// mount namespace of its own whose /etc/resolv.conf names the test's upstream (a loopback address
// at port 53, so root), dialing a fake istiod that answers Envoy's LDS request and sends a
// NameTable holding MESH_NAME. Returned once the proxy answers MESH_NAME from that table.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeIstiod, type TestPki } from "../support/fake-istiod.ts";
import { freePort, startPod, until, type Pod } from "../e2e/pod.ts";
import { EnvoyClient, LDS } from "../xds/harness.ts";
import { dig } from "../dns/helpers.ts";
import { nameInfo, nameTableCodec } from "../../src/dns/nametable.ts";
import { NAME_TABLE_TYPE } from "../../src/xds/types.ts";

export const MESH_NAME = "greeter.demo.svc.cluster.local";
export const MESH_IP = "10.9.8.7";
/** What dns-pod needs beyond the binary. */
export const DNS_POD_REQUIRES = { root: true, tools: ["dig", "unshare", "mount"], apt: ["dnsutils", "util-linux", "mount"] };

/** A loopback /24 of our own for this run, so parallel runs do not meet on port 53. */
export function privateLoopbackNet(): string {
  return `127.${50 + Math.floor(Math.random() * 150)}.${1 + Math.floor(Math.random() * 250)}`;
}

/** A fake istiod that answers LDS and sends a NameTable (MESH_NAME alone by default) once the agent asks. */
export async function nameTableIstiod(
  pki: TestPki,
  names: Record<string, unknown> = { [MESH_NAME]: nameInfo({ ips: [MESH_IP], registry: "Kubernetes", shortname: "greeter", namespace: "demo" }) },
): Promise<FakeIstiod> {
  const istiod = new FakeIstiod({ pki });
  const table = Buffer.from(nameTableCodec().encode({ table: names } as never));
  // The agent adds the NameTable subscription on Envoy's first Listener request, as Istio's does.
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
  return istiod.start();
}

export interface DnsPod {
  pod: Pod;
  port: number;
  close(): void;
}

export async function startDnsPod(o: {
  work: string;
  pki: TestPki;
  istiod: FakeIstiod;
  upstreamIp: string;
  listenIp: string;
  env?: Record<string, string>;
}): Promise<DnsPod> {
  const rc = join(o.work, `resolv-${o.upstreamIp}.conf`);
  writeFileSync(rc, `nameserver ${o.upstreamIp}\nsearch demo.svc.cluster.local svc.cluster.local cluster.local\n`);
  const port = await freePort();
  const pod = await startPod({
    prefix: ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', rc],
    env: {
      DISABLE_ENVOY: "true",
      CA_PROVIDER: "local",
      ISTIOD_SAN: "istiod.istio-system.svc",
      ISTIO_META_DNS_CAPTURE: "true",
      DNS_PROXY_ADDR: `${o.listenIp}:${port}`,
      DNS_FORWARD_TIMEOUT: "1s",
      ...o.env,
    },
    proxyConfig: { discoveryAddress: o.istiod.address, controlPlaneAuthPolicy: "MUTUAL_TLS" },
    files: { "var/run/secrets/tokens/istio-token": "t\n", "var/run/secrets/istio/root-cert.pem": readFileSync(o.pki.caCert, "utf8") },
  });
  let envoy: EnvoyClient | undefined;
  const close = () => {
    envoy?.close();
    pod.kill();
    pod.box.cleanup();
  };
  try {
    // The XDS proxy dials istiod on Envoy's first request; the NameTable rides that connection.
    await until(pod, "XDS socket", () => (existsSync(pod.path("etc/istio/proxy/XDS")) ? true : undefined));
    envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    envoy.send({ typeUrl: LDS });
    await until(
      pod,
      `${MESH_NAME} answered from the NameTable`,
      async () => {
        const r = await dig(port, MESH_NAME, "A", [], o.listenIp);
        return r.data.includes(MESH_IP) ? true : undefined;
      },
      20_000,
    );
  } catch (e) {
    close();
    throw e;
  }
  return { pod, port, close };
}
