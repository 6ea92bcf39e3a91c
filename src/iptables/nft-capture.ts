// The native nftables capture run (Istio's ProgramNftables + NftablesConfigurator.Run): generate
// the rules, render one transaction, and, unless it is a dry run, check it with `nft -c -f -`,
// apply it with `nft -f -` and read the ruleset back to compare with what the transaction says.
// Real runs also delete those of our tables that the transaction leaves out (a table left by an
// earlier run with another configuration), in the same transaction.

import type { Logger } from "../lib/log.ts";
import { CaptureError, describeConfig } from "./capture.ts";
import type { CaptureConfig } from "./config.ts";
import { compareVersion, type Exec } from "./deps.ts";
import { NFT_FAMILY, NFT_TABLES, renderCleanupProgram, renderProgram } from "./nft-builder.ts";
import { generateNftRules } from "./nft-rules.ts";
import { diffSummaries, NftState, NftStateError, summaryFromJson, type NftSummary } from "./nft-state.ts";
import { errorMessage } from "../lib/errors.ts";

/** knftables (which Istio uses) needs nft 1.0.1 or later. */
export const MIN_NFT_VERSION = [1, 0, 1];

export class NftError extends Error {
  override name = "NftError";
}

/** Runs `nft`; throws NftError naming the command and nft's message when it fails. */
export interface NftRunner {
  run(args: readonly string[], stdin?: string): Promise<string>;
}

export function realNft(exec: Exec, debug?: (msg: string) => void): NftRunner {
  return {
    async run(args, stdin) {
      debug?.(`running nft ${args.join(" ")}`);
      const r = await exec("nft", args, stdin !== undefined ? { stdin } : {}).catch((e: unknown) => ({ code: 127, stdout: "", stderr: errorMessage(e) }));
      if (r.code !== 0) throw new NftError(`nft ${args.join(" ")}: ${r.stderr.trim() || `exit status ${r.code}`}`);
      return r.stdout;
    },
  };
}

/** `nft --version` output -> [major, minor, patch], or undefined. */
export function parseNftVersion(out: string): number[] | undefined {
  const m = /v(\d+)\.(\d+)(?:\.(\d+))?/.exec(out);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : undefined;
}

/** The transaction a run applies: the rules (or the cleanup), checked against the state model. */
export function nftProgram(cfg: CaptureConfig, log: Logger): string {
  const { builder, warnings } = generateNftRules(cfg);
  for (const w of warnings) log.warn(w);
  const program = cfg.CLEANUP_ONLY ? renderCleanupProgram() : renderProgram(builder);
  try {
    new NftState().apply(program);
  } catch (e) {
    if (e instanceof NftStateError)
      throw new CaptureError(`the generated nftables rules are inconsistent (${e.message}); check the DNS servers and IPv6 settings`);
    throw e;
  }
  return program;
}

/** Lines deleting those of our tables the program does not mention (real runs only). */
export function sweepLines(program: string): string {
  return NFT_TABLES.filter((t) => !program.includes(`add table ${NFT_FAMILY} ${t}\n`))
    .flatMap((t) => [`add table ${NFT_FAMILY} ${t}`, `delete table ${NFT_FAMILY} ${t}`])
    .map((l) => l + "\n")
    .join("");
}

/**
 * Runs the capture. `nft` undefined is a dry run: nothing is executed. Returns the program
 * (without the sweep), which is what a dry run prints.
 */
export async function runNftCapture(cfg: CaptureConfig, nft: NftRunner | undefined, log: Logger): Promise<string> {
  log.info("native nftables enabled, using nft rules for traffic redirection.");
  const program = nftProgram(cfg, log);
  log.info(`Istio config:\n${describeConfig(cfg)}`);
  if (!nft) return program;

  const version = parseNftVersion(await nft.run(["--version"]));
  if (!version) throw new CaptureError("could not read the version of nft (nft --version)");
  if (compareVersion(version, MIN_NFT_VERSION) < 0)
    throw new CaptureError(`nft ${version.join(".")} is too old: native nftables needs nft ${MIN_NFT_VERSION.join(".")} or later`);

  const sweep = cfg.CLEANUP_ONLY ? "" : sweepLines(program);
  if (sweep) log.info(`Removing our nftables tables that this configuration leaves out:\n${sweep.trim()}`);
  const full = program + sweep;
  try {
    await nft.run(["-c", "-f", "-"], full);
  } catch (e) {
    throw new CaptureError(`the generated nftables program was rejected by nft --check; nothing was applied: ${errorMessage(e)}\n${full.trim()}`, { cause: e });
  }
  try {
    await nft.run(["-f", "-"], full);
  } catch (e) {
    throw new CaptureError(`nftables run failed: ${errorMessage(e)}`, { cause: e });
  }
  log.info(cfg.CLEANUP_ONLY ? `nftables tables removed:\n${full.trim()}` : `nftables rules programmed:\n${program.trim()}`);

  const want = new NftState().apply(full).summary(NFT_FAMILY, NFT_TABLES);
  let got: NftSummary;
  try {
    got = summaryFromJson(await nft.run(["-j", "list", "ruleset", NFT_FAMILY]), NFT_FAMILY, NFT_TABLES);
  } catch (e) {
    throw new CaptureError(`could not read back the nftables ruleset: ${errorMessage(e)}`, { cause: e });
  }
  const diff = diffSummaries(want, got);
  if (diff.length > 0) throw new CaptureError(`the nftables ruleset read back after applying differs from the program: ${diff.join("; ")}`);
  log.debug("nftables ruleset read back: matches the program");
  return program;
}
