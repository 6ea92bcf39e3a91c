// The xDS relay alone, as a process, for bench/xds.ts (CPU and RSS are read from /proc/<pid>).
// Env: XDS_RELAY_SOCKET (UDS path), XDS_RELAY_UPSTREAM (host:port, plaintext).
// Prints "READY" once listening; exits on SIGTERM.

import { newRegistry } from "../src/lib/metrics.ts";
import { LogSink } from "../src/lib/log.ts";
import { PeerAuthorizer } from "../src/lib/peerauth.ts";
import { XdsProxy } from "../src/xds/proxy.ts";
import { IstiodUpstream } from "../src/xds/upstream.ts";
import { splitHostPort } from "../src/xds/upstream-config.ts";

const socketPath = process.env.XDS_RELAY_SOCKET ?? "/tmp/xds-relay.sock";
const address = process.env.XDS_RELAY_UPSTREAM ?? "127.0.0.1:15010";
const { host, port } = splitHostPort(address);
const log = new LogSink({ outputLevels: process.env.XDS_RELAY_LOG ?? "all:warn", write: (l) => process.stderr.write(l + "\n") }).logger();
const proxy = new XdsProxy({
  socketPath,
  upstream: new IstiodUpstream({ address, host, port, tokenPath: "/nonexistent", clusterId: "", xdsHeaders: {}, keepaliveMs: 30_000, keepaliveTimeoutMs: 10_000, connectTimeoutMs: 5000 }),
  authorizer: new PeerAuthorizer("*", process.getuid?.() ?? 0),
  log,
  registry: newRegistry(),
  subscribeNds: false,
  subscribePcds: false,
  maxRequestBytes: 4 << 20,
});
const ac = new AbortController();
await proxy.start(ac.signal);
process.stdout.write("READY\n");
process.on("SIGTERM", () => {
  ac.abort();
  void proxy.stopped().then(() => process.exit(0));
});
