// What a command gets from the entry point: output streams and the environment. Commands never
// touch process.* themselves (except `proxy`, which owns signals through `onSignal`).

import type { EnvMap } from "../config/envdecl.ts";

export interface CliIO {
  out(text: string): void;
  err(text: string): void;
  env: EnvMap;
  cwd: string;
  /** The argv prefix that runs this program again (Envoy is started through it, see envoy/deathlink.ts). */
  selfCommand?: readonly string[];
  /** Subscribe to SIGTERM/SIGINT; returns an unsubscribe function. */
  onSignal?(handler: (signal: "SIGTERM" | "SIGINT") => void): () => void;
}

export class CliError extends Error {
  override name = "CliError";
  constructor(
    message: string,
    readonly exitCode = 255,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
