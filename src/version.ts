// Build information baked in by build.ts (`--define`); plain `bun src/main.ts` reports "dev".

declare const AGENT_BUILD_VERSION: string | undefined;
declare const AGENT_BUILD_COMMIT: string | undefined;
declare const AGENT_BUILD_STATUS: string | undefined;

export interface BuildInfo {
  version: string;
  revision: string;
  status: string;
  runtime: string;
}

export function buildInfo(): BuildInfo {
  return {
    version: typeof AGENT_BUILD_VERSION === "string" ? AGENT_BUILD_VERSION : "dev",
    revision: typeof AGENT_BUILD_COMMIT === "string" ? AGENT_BUILD_COMMIT : "unknown",
    status: typeof AGENT_BUILD_STATUS === "string" ? AGENT_BUILD_STATUS : "Modified",
    runtime: `bun${typeof Bun !== "undefined" ? Bun.version : "?"}`,
  };
}
