// The capture run (Istio's IptablesConfigurator.Run + executeCommands): detect binaries, generate
// rules, check the live state, clean up / reconcile / apply, and dump the final state. Runs the
// same code for dry runs (recording Xtables) and real runs; real runs additionally check each
// payload with `iptables-restore --test` before applying anything and sweep ISTIO_ leftovers
// that the configured rules do not cover.

import type { Logger } from "../lib/log.ts";
import {
  buildCleanup,
  buildCleanupFromState,
  buildCleanupGuardrails,
  buildGuardrails,
  buildRestore,
  istioLeftovers,
  stateFromSave,
  type RuleBuilder,
} from "./builder.ts";
import type { CaptureConfig } from "./config.ts";
import { XtablesError, type IptablesVersion, type Xtables } from "./deps.ts";
import { generateRules } from "./rules.ts";
import { verifyState } from "./state.ts";
import { errorMessage } from "../lib/errors.ts";

export class CaptureError extends Error {
  override name = "CaptureError";
}

/** Istio's "Istio config:" dump. */
export function describeConfig(c: CaptureConfig): string {
  return [
    `PROXY_PORT=${c.PROXY_PORT}`,
    `PROXY_INBOUND_CAPTURE_PORT=${c.INBOUND_CAPTURE_PORT}`,
    `PROXY_TUNNEL_PORT=${c.INBOUND_TUNNEL_PORT}`,
    `PROXY_UID=${c.PROXY_UID}`,
    `PROXY_GID=${c.PROXY_GID}`,
    `INBOUND_INTERCEPTION_MODE=${c.INBOUND_INTERCEPTION_MODE}`,
    `INBOUND_TPROXY_MARK=${c.INBOUND_TPROXY_MARK}`,
    `INBOUND_TPROXY_ROUTE_TABLE=${c.INBOUND_TPROXY_ROUTE_TABLE}`,
    `INBOUND_PORTS_INCLUDE=${c.INBOUND_PORTS_INCLUDE}`,
    `INBOUND_PORTS_EXCLUDE=${c.INBOUND_PORTS_EXCLUDE}`,
    `OUTBOUND_OWNER_GROUPS_INCLUDE=${c.OUTBOUND_OWNER_GROUPS_INCLUDE}`,
    `OUTBOUND_OWNER_GROUPS_EXCLUDE=${c.OUTBOUND_OWNER_GROUPS_EXCLUDE}`,
    `OUTBOUND_IP_RANGES_INCLUDE=${c.OUTBOUND_IPRANGES_INCLUDE}`,
    `OUTBOUND_IP_RANGES_EXCLUDE=${c.OUTBOUND_IPRANGES_EXCLUDE}`,
    `OUTBOUND_PORTS_INCLUDE=${c.OUTBOUND_PORTS_INCLUDE}`,
    `OUTBOUND_PORTS_EXCLUDE=${c.OUTBOUND_PORTS_EXCLUDE}`,
    `KUBE_VIRT_INTERFACES=${c.KUBE_VIRT_INTERFACES}`,
    `ENABLE_INBOUND_IPV6=${c.ENABLE_INBOUND_IPV6}`,
    `DUAL_STACK=${c.DUAL_STACK}`,
    `DNS_CAPTURE=${c.REDIRECT_DNS}`,
    `DROP_INVALID=${c.DROP_INVALID}`,
    `CAPTURE_ALL_DNS=${c.CAPTURE_ALL_DNS}`,
    `DNS_SERVERS=[${c.DNS_SERVERS_V4.join(" ")}],[${c.DNS_SERVERS_V6.join(" ")}]`,
    `NETWORK_NAMESPACE=${c.NETWORK_NAMESPACE}`,
    `CNI_MODE=${c.CNI_MODE}`,
    `EXCLUDE_INTERFACES=${c.EXCLUDE_INTERFACES}`,
    `RECONCILE=${c.RECONCILE}`,
    `CLEANUP_ONLY=${c.CLEANUP_ONLY}`,
    `FORCE_APPLY=${c.FORCE_APPLY}`,
    `NATIVE_NFTABLES=${c.NATIVE_NFTABLES}`,
    `FORCE_IPTABLES_BINARY=${c.FORCE_IPTABLES_BINARY}`,
    `IPTABLES_TRACE_LOGGING=${c.TRACE_LOGGING}`,
  ].join("\n");
}

export async function runCapture(cfg: CaptureConfig, xt: Xtables, log: Logger): Promise<void> {
  const v4 = await xt.detect(false);
  let v6: IptablesVersion | undefined;
  try {
    v6 = await xt.detect(true);
  } catch (e) {
    if (cfg.ENABLE_INBOUND_IPV6) throw e;
    log.warn(`Failed to detect a working ip6tables binary; continuing because IPv6 support is disabled (ENABLE_INBOUND_IPV6=false): ${errorMessage(e)}`);
  }
  try {
    const { builder, warnings } = generateRules(cfg);
    for (const w of warnings) log.warn(w);
    log.info(`Istio config:\n${describeConfig(cfg)}`);
    await execute(cfg, xt, builder, v4, v6, log);
  } finally {
    // Best effort, like Istio: the final state is logged even when the run failed.
    try {
      log.info(`Final iptables state (IPv4):\n${await xt.run("save", v4, [])}`);
    } catch {
      /* logged by nobody, as in Istio */
    }
    if (cfg.ENABLE_INBOUND_IPV6 && v6) {
      try {
        log.info(`Final iptables state (IPv6):\n${await xt.run("save", v6, [])}`);
      } catch {
        /* best effort */
      }
    }
  }
}

async function tryAll(xt: Xtables, ver: IptablesVersion, cmds: readonly string[][], log: Logger): Promise<void> {
  for (const cmd of cmds) {
    try {
      await xt.run("iptables", ver, cmd);
    } catch (e) {
      log.debug(`Ignoring iptables command error: ${errorMessage(e)}`);
    }
  }
}

async function execute(cfg: CaptureConfig, xt: Xtables, rb: RuleBuilder, v4: IptablesVersion, v6: IptablesVersion | undefined, log: Logger): Promise<void> {
  const families: [IptablesVersion, "v4" | "v6"][] = [[v4, "v4"]];
  if (cfg.ENABLE_INBOUND_IPV6 && v6) families.push([v6, "v6"]);
  let guardrails = false;
  try {
    const { residue, delta } = await verifyState(xt, rb, v4, v6, log);
    if (residue && delta && !cfg.RECONCILE) {
      log.info("reconcile is recommended but no-reconcile flag is set. Unexpected behavior may occur due to preexisting iptables rules");
    }
    if ((residue && delta && cfg.RECONCILE) || cfg.CLEANUP_ONLY) {
      if (!cfg.CLEANUP_ONLY) {
        log.info("Setting up guardrails");
        for (const [ver] of families) {
          await tryAll(xt, ver, buildCleanupGuardrails(), log);
          for (const cmd of buildGuardrails()) await xt.run("iptables", ver, cmd);
          guardrails = true;
        }
      }
      log.info("Performing cleanup of existing iptables");
      for (const [ver, f] of families) await tryAll(xt, ver, buildCleanup(rb.rules(f)), log);
      if (xt.testsPayloads) {
        // Beyond Istio: also remove ISTIO_ chains and jumps left by a different earlier configuration.
        for (const [ver] of v6 && !families.some(([, f]) => f === "v6") ? [...families, [v6, "v6"] as const] : families) {
          const leftovers = istioLeftovers(stateFromSave(await xt.run("save", ver, [])));
          if (Object.keys(leftovers).length > 0) {
            log.info(
              `Removing leftover ISTIO_ chains and jumps (${ver.binary}): ${Object.entries(leftovers)
                .map(([t, l]) => `${t}: ${l.chains.join(",") || "-"}`)
                .join("; ")}`,
            );
            await tryAll(xt, ver, buildCleanupFromState(leftovers), log);
          }
        }
      }
    }
    if ((delta || cfg.FORCE_APPLY) && !cfg.CLEANUP_ONLY) {
      log.info("Applying iptables chains and rules");
      const payloads = families.map(([ver, f]) => [ver, buildRestore(rb.rules(f))] as const);
      if (xt.testsPayloads) {
        for (const [ver, data] of payloads) {
          try {
            await xt.run("restore", ver, ["--test", "--noflush"], data);
          } catch (e) {
            throw new CaptureError(
              `the generated rules were rejected by ${ver.restoreBinary} --test; nothing was applied: ${(e as XtablesError).message}\n${data.trim()}`,
            );
          }
        }
      }
      for (const [ver, data] of payloads) {
        log.info(`Running iptables restore with: ${ver.restoreBinary} and the following input:\n${data.trim()}`);
        await xt.run("restore", ver, ["--noflush"], data);
      }
    }
    if (!delta && cfg.FORCE_APPLY) {
      log.warn(
        "The forced apply of iptables changes succeeded despite the presence of conflicting rules or chains. If you encounter this message, please consider reporting it as an issue.",
      );
    }
  } finally {
    if (guardrails) {
      log.info("Removing guardrails");
      for (const [ver] of families) await tryAll(xt, ver, buildCleanupGuardrails(), log);
    }
  }
}
