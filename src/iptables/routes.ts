// Istio's tproxy.ConfigureRoutes, through the `ip` command: `::6/128` on `lo` when IPv6 is on
// (the inbound passthrough source), and for TPROXY inbound capture the fwmark rule and the local
// default route. Beyond Istio, re-running does not add duplicate `ip rule` entries.

import type { Logger } from "../lib/log.ts";
import type { CaptureConfig } from "./config.ts";
import type { Exec } from "./deps.ts";
import { errorMessage } from "../lib/errors.ts";

export class RouteError extends Error {
  override name = "RouteError";
}

export interface RouteCommand {
  args: string[];
  /** Skip when this `ip` listing already shows the entry. */
  unlessListed?: { list: string[]; match: RegExp };
  /** "File exists" / "address already assigned" is success. */
  ignoreExists: boolean;
}

/** The `ip` invocations a run needs (pure). */
export function planRoutes(cfg: CaptureConfig): RouteCommand[] {
  const out: RouteCommand[] = [];
  if (cfg.ENABLE_INBOUND_IPV6) out.push({ args: ["-6", "addr", "add", "::6/128", "dev", "lo"], ignoreExists: true });
  if (cfg.INBOUND_PORTS_INCLUDE !== "" && cfg.INBOUND_INTERCEPTION_MODE === "TPROXY") {
    const mark = Number(cfg.INBOUND_TPROXY_MARK);
    const table = cfg.INBOUND_TPROXY_ROUTE_TABLE;
    const families = cfg.ENABLE_INBOUND_IPV6 ? ["-4", "-6"] : ["-4"];
    const rulePattern = new RegExp(`fwmark 0x${mark.toString(16)}\\b.*lookup ${table}\\b`);
    for (const fam of families) {
      out.push({
        args: [fam, "rule", "add", "fwmark", String(mark), "lookup", table],
        ignoreExists: true,
        unlessListed: { list: [fam, "rule", "show"], match: rulePattern },
      });
    }
    for (const fam of families) out.push({ args: [fam, "route", "add", "local", "default", "dev", "lo", "table", table], ignoreExists: true });
  }
  return out;
}

export async function configureRoutes(cfg: CaptureConfig, exec: Exec, log: Logger): Promise<void> {
  for (const cmd of planRoutes(cfg)) {
    if (cmd.unlessListed) {
      const listed = await exec("ip", cmd.unlessListed.list).catch(() => undefined);
      if (listed && listed.code === 0 && cmd.unlessListed.match.test(listed.stdout)) {
        log.info(`ip ${cmd.args.join(" ")}: already present`);
        continue;
      }
    }
    const r = await exec("ip", cmd.args).catch((e: unknown) => ({ code: 127, stdout: "", stderr: errorMessage(e) }));
    if (r.code !== 0 && !(cmd.ignoreExists && /file exists|already assigned/i.test(r.stderr))) {
      throw new RouteError(`failed to configure routes: ip ${cmd.args.join(" ")}: ${r.stderr.trim() || `exit status ${r.code}`}`);
    }
    log.info(`ip ${cmd.args.join(" ")}`);
  }
}
