// TCP probe: a connection that opens within the timeout is healthy.

import net from "node:net";
import { errorMessage } from "../../lib/errors.ts";
import { joinHostPort } from "../loopback.ts";

export interface TcpProbeRequest {
  host: string;
  port: number;
  timeoutMs: number;
  localAddress?: string;
}

/** undefined when the connection opened, else why not. */
export function tcpProbe(req: TcpProbeRequest): Promise<string | undefined> {
  return new Promise((resolve) => {
    const target = joinHostPort(req.host, req.port);
    const opts: net.NetConnectOpts = { host: req.host, port: req.port };
    if (req.localAddress) {
      opts.localAddress = req.localAddress;
      opts.family = net.isIPv6(req.localAddress) ? 6 : 4;
    }
    let done = false;
    const finish = (err: string | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(err);
    };
    const sock = net.connect(opts, () => finish(undefined));
    sock.on("error", (e) => finish(`dial tcp ${target}${req.localAddress ? ` from ${req.localAddress}` : ""}: ${errorMessage(e)}`));
    const timer = setTimeout(() => finish(`dial tcp ${target}: timed out after ${req.timeoutMs}ms`), req.timeoutMs);
  });
}
