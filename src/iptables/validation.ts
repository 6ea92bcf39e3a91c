// --run-validation (Istio's tools/istio-iptables/pkg/validation): listen on loopback at the
// outbound and inbound capture ports, connect repeatedly to 127.0.0.6:<probe port> (::6 on IPv6
// hosts) and succeed once a listener sees SO_ORIGINAL_DST with the probe port — proof that the
// redirect rules are live. Must run as the proxy UID (the rules only redirect its loopback traffic).

import net from "node:net";
import { socketFd } from "../../native/peercred.ts";
import type { Logger } from "../lib/log.ts";
import { systemClock } from "../lib/clock.ts";
import { OriginalDstReader } from "./origdst.ts";

export const VALIDATION_ERROR_CODE = 126;

export const VALIDATION_FAILED_MESSAGE = `iptables validation failed; workload is not ready for Istio.
When using Istio CNI, this can occur if a pod is scheduled before the node is ready.

If installed with 'cni.repair.deletePods=true', this pod should automatically be deleted and retry.
Otherwise, this pod will need to be manually removed so that it is scheduled on a node with istio-cni running, allowing iptables rules to be established.`;

export interface ValidationOptions {
  ipv6: boolean;
  listenPorts: number[];
  probePort: number;
  timeoutMs: number;
  /** Delay between client attempts (Istio: 1s). */
  retryMs?: number;
  log: Logger;
}

export async function runValidation(o: ValidationOptions): Promise<void> {
  const listenIP = o.ipv6 ? "::1" : "127.0.0.1";
  const serverIP = o.ipv6 ? "::6" : "127.0.0.6";
  const reader = new OriginalDstReader();
  const stop = new AbortController();
  const servers: net.Server[] = [];
  o.log.info("Starting iptables validation. This check verifies that iptables rules are properly established for the network.");
  try {
    const passed = new Promise<void>((resolve) => {
      for (const port of o.listenPorts) {
        const srv = net.createServer((sock) => {
          const fd = socketFd(sock);
          const orig = fd !== undefined ? reader.read(fd, o.ipv6) : undefined;
          sock.end(orig ? String(orig.port) : "");
          if (orig?.port === o.probePort) resolve();
        });
        srv.on("error", (e) => o.log.error(`Error on listening: ${e.message}`));
        srv.listen(port, listenIP, () => o.log.info(`Listening on ${o.ipv6 ? `[${listenIP}]` : listenIP}:${port}`));
        servers.push(srv);
      }
    });
    const client = (async () => {
      while (!stop.signal.aborted) {
        await new Promise<void>((resolve) => {
          const c = net.connect({ host: serverIP, port: o.probePort, localAddress: listenIP });
          c.on("error", () => resolve());
          c.on("close", () => resolve());
          c.on("connect", () => c.end());
        });
        await systemClock.sleep(o.retryMs ?? 1000, stop.signal);
      }
    })();
    const ok = await Promise.race([passed.then(() => true), systemClock.sleep(o.timeoutMs, stop.signal).then(() => false)]);
    stop.abort();
    await client;
    if (!ok) throw new Error("validation timeout");
    o.log.info("Validation passed, iptables rules established");
  } finally {
    stop.abort();
    for (const s of servers) s.close();
  }
}
