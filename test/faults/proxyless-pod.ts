// The pod most fault cases start: the compiled agent in proxyless mode (no Envoy, local CA), a
// token file, the mesh root CA mounted where a pod has it, dialing istiod over mutual TLS; returned
// once its XDS socket is listening.

import { existsSync, readFileSync } from "node:fs";
import type { TestPki } from "../support/fake-istiod.ts";
import { startPod, until, type Pod } from "../e2e/pod.ts";

export async function startProxylessPod(
  pki: TestPki,
  discoveryAddress: string,
  extra: { env?: Record<string, string>; proxyConfig?: Record<string, unknown> } = {},
): Promise<Pod> {
  const pod = await startPod({
    env: { DISABLE_ENVOY: "true", CA_PROVIDER: "local", ISTIOD_SAN: "istiod.istio-system.svc", ...extra.env },
    proxyConfig: { discoveryAddress, controlPlaneAuthPolicy: "MUTUAL_TLS", ...extra.proxyConfig },
    // The root is there before the agent starts: copied after, a fast start could miss it.
    files: { "var/run/secrets/tokens/istio-token": "t\n", "var/run/secrets/istio/root-cert.pem": readFileSync(pki.caCert, "utf8") },
  });
  await until(pod, "XDS socket", () => (existsSync(pod.path("etc/istio/proxy/XDS")) ? true : undefined));
  return pod;
}
