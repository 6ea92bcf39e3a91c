// The real edges of the platform probes: small system files, DNS, a TCP dial, fetch.

import { closeSync, openSync, readSync } from "node:fs";
import { lookup } from "node:dns/promises";
import { connect } from "node:net";
import type { Logger } from "../lib/log.ts";
import { fetchMetadata } from "./http.ts";
import type { PlatformDeps } from "./types.ts";

/** sysfs DMI entries and resolv.conf are tiny; read no more than this. */
const SYSTEM_FILE_CAP = 64 * 1024;

export function readSmallFile(path: string, cap = SYSTEM_FILE_CAP): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const buf = Buffer.alloc(cap);
    let n = 0;
    for (;;) {
      const r = readSync(fd, buf, n, cap - n, null);
      if (r === 0 || n + r >= cap) {
        n += r;
        break;
      }
      n += r;
    }
    return buf.subarray(0, n).toString("utf8");
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(`${what}: no answer within ${ms}ms`)), ms)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

export function systemPlatformDeps(log: Logger): PlatformDeps {
  return {
    http: fetchMetadata,
    readSystemFile: (path) => readSmallFile(path),
    lookupHost: (name, ms) =>
      withTimeout(
        lookup(name, { all: true }).then((a) => a.map((x) => x.address)),
        ms,
        `lookup ${name}`,
      ),
    canDial: (host, port, ms) =>
      new Promise((resolve) => {
        const sock = connect({ host, port });
        const done = (ok: boolean) => {
          clearTimeout(t);
          sock.destroy();
          resolve(ok);
        };
        const t = setTimeout(() => done(false), ms);
        sock.once("connect", () => done(true));
        sock.once("error", () => done(false));
      }),
    log,
  };
}
