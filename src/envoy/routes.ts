// POST /quitquitquit and POST /drain on the status port, as a plain fetch-style handler anyone can
// mount (the status server, or a minimal server until it exists). Istio's rules
// (pilot-agent status/server.go handleQuit/handleDrain): loopback clients only (403), POST only
// (405), answer 200 `OK`, then act.

import { isIP } from "node:net";
import type { LifecycleControl } from "../lib/interfaces.ts";
import type { Logger } from "../lib/log.ts";

/** Loopback per Go's net.IP.IsLoopback: 127.0.0.0/8, ::1, and IPv4-mapped 127.x. */
export function isLoopback(ip: string | undefined): boolean {
  if (!ip) return false;
  const bare = ip.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const v4 = bare.toLowerCase().startsWith("::ffff:") ? bare.slice(7) : bare;
  if (isIP(v4) === 4) return v4.startsWith("127.");
  if (isIP(bare) === 6) return /^(0{0,4}:){2,7}0{0,3}1$/.test(bare) || bare === "::1";
  return false;
}

export type LifecycleHandler = (req: Request, remoteIp: string | undefined) => Response | undefined;

/**
 * A handler for `/quitquitquit` and `/drain`; returns undefined for any other path so it can be
 * chained. `remoteIp` is the client's address (Bun: `server.requestIP(req)?.address`); when it is
 * unknown the request is refused, never assumed local.
 */
export function lifecycleRoutes(ctrl: LifecycleControl, log?: Logger): LifecycleHandler {
  return (req, remoteIp) => {
    const path = new URL(req.url).pathname;
    if (path !== "/quitquitquit" && path !== "/drain") return undefined;
    if (!isLoopback(remoteIp)) return new Response("Only requests from localhost are allowed\n", { status: 403 });
    if (req.method !== "POST") return new Response("Method Not Allowed\n", { status: 405 });
    if (path === "/quitquitquit") {
      log?.info("handling /quitquitquit, notifying pilot-agent to exit");
      queueMicrotask(() => ctrl.quit());
    } else {
      log?.info("handling /drain, starting drain");
      queueMicrotask(() => void ctrl.drain());
    }
    return new Response("OK");
  };
}
