// The pod most fault cases start: the compiled agent in proxyless mode (no Envoy, local CA), a
// token file, the mesh root CA mounted where a pod has it, dialing istiod over mutual TLS; returned
// once its XDS socket is listening.

import { afterAll, beforeAll } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeIstiod, makeTestPki, type TestPki } from "../support/fake-istiod.ts";
import { startPod, until, type Pod } from "../e2e/pod.ts";

type Extra = { env?: Record<string, string>; proxyConfig?: Record<string, unknown> };

export async function startProxylessPod(pki: TestPki, discoveryAddress: string, extra: Extra = {}): Promise<Pod> {
  const pod = await startPod({
    env: { DISABLE_ENVOY: "true", CA_PROVIDER: "local", ISTIOD_SAN: "istiod.istio-system.svc", ...extra.env },
    proxyConfig: { discoveryAddress, controlPlaneAuthPolicy: "MUTUAL_TLS", ...extra.proxyConfig },
    // The root is there before the agent starts: copied after, a fast start could miss it.
    files: { "var/run/secrets/tokens/istio-token": "t\n", "var/run/secrets/istio/root-cert.pem": readFileSync(pki.caCert, "utf8") },
  });
  await until(pod, "XDS socket", () => (existsSync(pod.path("etc/istio/proxy/XDS")) ? true : undefined));
  return pod;
}

/**
 * Registers in the calling scope (a describe, or the file) a FakeIstiod over mutual TLS with a
 * PKI of its own and a proxyless pod dialing it: started before the scope's tests, which get both
 * through `started`, and torn down after them.
 */
export function podBesideIstiod(name: string, started: (s: { pod: Pod; istiod: FakeIstiod }) => void, extra: Extra = {}): void {
  let work = "";
  let istiod: FakeIstiod | undefined;
  let pod: Pod | undefined;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), `agent-faults-${name}-`));
    const pki = makeTestPki(join(work, "pki"));
    istiod = new FakeIstiod({ pki });
    await istiod.start();
    pod = await startProxylessPod(pki, istiod.address, extra);
    started({ pod, istiod });
  }, 30_000);
  afterAll(async () => {
    pod?.kill();
    await istiod?.stop();
    pod?.box.cleanup();
    if (work) rmSync(work, { recursive: true, force: true });
  });
}
