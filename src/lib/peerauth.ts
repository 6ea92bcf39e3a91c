// Who may talk to the agent's Unix sockets (XDS and SDS). Beyond Istio, which relies on file
// modes alone: every accepted connection is checked with SO_PEERCRED and only allowed UIDs are
// served. XDS_AUTHORIZED_UIDS: comma list of UIDs, `*` to turn the check off; default = the
// agent's own UID, 1337 (istio-proxy) and 0 with Envoy; every UID in proxyless mode
// (DISABLE_ENVOY), where the xDS client is the application, running as its own UID.

import type { Socket } from "node:net";
import { peerCredentials, socketFd, type PeerCred } from "../../native/peercred.ts";
import { systemClock, type Clock } from "./clock.ts";
import type { Fields, Logger } from "./log.ts";
import { DEFAULT_LOG_LIMIT, LogLimiter } from "./loglimit.ts";

export class PeerAuthError extends Error {
  override name = "PeerAuthError";
}

export type PeerDecision = { allowed: true; cred?: PeerCred } | { allowed: false; cred?: PeerCred; reason: string };

export class PeerAuthorizer {
  readonly any: boolean;
  readonly uids: ReadonlySet<number>;

  /**
   * `spec` is XDS_AUTHORIZED_UIDS. Unset: {own UID, 1337, 0}, or every UID when `proxyless`
   * (the application container is the xDS client; Istio checks no peer at all).
   */
  constructor(spec: string, ownUid: number, proxyless = false) {
    const s = spec.trim();
    if (s === "*" || (s === "" && proxyless)) {
      this.any = true;
      this.uids = new Set();
      return;
    }
    this.any = false;
    if (s === "") {
      this.uids = new Set([ownUid, 1337, 0]);
      return;
    }
    const uids = new Set<number>();
    for (const part of s.split(",")) {
      const p = part.trim();
      if (!/^\d+$/.test(p)) throw new PeerAuthError(`XDS_AUTHORIZED_UIDS: "${p}" is not a UID (want a comma list of numbers, or *)`);
      uids.add(Number(p));
    }
    this.uids = uids;
  }

  /** One line for the start-up log: who is allowed. */
  describe(): string {
    return this.any ? "any UID" : `UIDs ${[...this.uids].join(",")}`;
  }

  check(sock: Socket): PeerDecision {
    return this.checkFd(this.any ? undefined : socketFd(sock));
  }

  /** The same check on a connected Unix socket's file descriptor (Bun's own sockets expose it). */
  checkFd(fd: number | undefined): PeerDecision {
    if (this.any) return { allowed: true };
    const cred = fd === undefined ? undefined : peerCredentials(fd);
    if (!cred) return { allowed: false, reason: "peer credentials unavailable" };
    if (this.uids.has(cred.uid)) return { allowed: true, cred };
    return { allowed: false, cred, reason: `uid ${cred.uid} not in authorized UIDs [${[...this.uids].join(",")}]` };
  }
}

/**
 * The warn line of each refused connection on one socket, rate limited: a peer opening thousands
 * of connections a second costs the first 10 lines of each 10 s, and the window's last refusal is
 * written when it ends with `suppressed=<n>` for the others (the counters count every one).
 */
export function refusalLog(log: Logger, clock: Pick<Clock, "now" | "timer"> = systemClock): (msg: string, fields?: Fields) => void {
  const limiter = new LogLimiter({ ...DEFAULT_LOG_LIMIT, now: () => clock.now(), timer: (ms, fn) => clock.timer(ms, fn) });
  return (msg, fields) => limiter.log(log, "warn", "peer-refused", msg, fields);
}
