// The real CaptureHost: interface addresses (getifaddrs, as Go's net.InterfaceAddrs), resolv.conf
// nameservers and /etc/passwd lookups. Parsing is pure and exported for tests.

import { allAddresses, readHostAddresses } from "../config/hostaddrs.ts";
import { splitDnsServers, type CaptureHost } from "./config.ts";
import { isLinkLocal, isLoopback, parseAddr } from "./net.ts";
import { FILE_LIMITS, readBoundedTextSync } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";

/** `nameserver <addr>` lines of a resolv.conf, in order. */
export function parseResolvConf(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/[#;].*$/, "").trim();
    const f = line.split(/\s+/);
    if (f[0] === "nameserver" && f[1]) out.push(f[1]);
  }
  return out;
}

/** The UID of `user` in a passwd file. */
export function lookupPasswd(text: string, user: string): string | undefined {
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f.length >= 3 && f[0] === user && /^\d+$/.test(f[2]!)) return f[2];
  }
  return undefined;
}

/** Istio's getLocalIP over an address list: first usable; with dualStack prefer the first IPv6. */
export function pickLocalIP(addrs: readonly string[], dualStack: boolean): { ip: string; ipv6: boolean } {
  let first: { ip: string; ipv6: boolean } | undefined;
  for (const a of addrs) {
    let p = parseAddr(a);
    if (!p) continue;
    if (p.family === 6 && p.bytes.slice(0, 10).every((x) => x === 0) && p.bytes[10] === 0xff && p.bytes[11] === 0xff)
      p = { family: 4, bytes: p.bytes.slice(12) };
    if (isLoopback(p) || isLinkLocal(p)) continue;
    const found = { ip: a, ipv6: p.family === 6 };
    if (!dualStack) return found;
    first ??= found;
    if (found.ipv6) return { ip: first.ip, ipv6: true };
  }
  if (first) return first;
  throw new Error("no valid local IP address found");
}

export interface SystemHostPaths {
  resolvConf?: string;
  passwd?: string;
  /** Where a warning goes (getifaddrs not callable: the addresses come from os.networkInterfaces()). */
  warn?: (message: string) => void;
}

export function systemHost(paths: SystemHostPaths = {}): CaptureHost {
  return {
    localIP(dualStack) {
      const h = readHostAddresses();
      if (h.warning) paths.warn?.(h.warning);
      return pickLocalIP(allAddresses(h), dualStack);
    },
    dnsServers() {
      const path = paths.resolvConf ?? "/etc/resolv.conf";
      try {
        return splitDnsServers(parseResolvConf(readBoundedTextSync(path, FILE_LIMITS.system)));
      } catch (e) {
        throw new Error(`failed to load ${path}: ${errorMessage(e)}`, { cause: e });
      }
    },
    lookupUid(user) {
      if (user === "") return undefined;
      try {
        return lookupPasswd(readBoundedTextSync(paths.passwd ?? "/etc/passwd", FILE_LIMITS.system), user);
      } catch {
        return undefined;
      }
    },
  };
}
