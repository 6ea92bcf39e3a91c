// Build information baked in by build.ts (`--define`); plain `bun src/main.ts` reports "dev".
// Beside it, the Istio release whose agent contract this build implements: sent to istiod as the
// ISTIO_VERSION node metadata (istiod generates config for the proxy's version; our own version
// would look like an ancient Istio). Update both together when moving to a newer Istio.

/** The istio/istio commit the agent's contract was read from (the goldens of test/conformance/vectors are from it too). */
export const ISTIO_COMMIT = "86c9f01fd735";
/** The Istio release of that commit: the default ISTIO_VERSION node metadata. */
export const ISTIO_RELEASE = "1.32.0";

declare const AGENT_BUILD_VERSION: string | undefined;
declare const AGENT_BUILD_COMMIT: string | undefined;
declare const AGENT_BUILD_STATUS: string | undefined;

export interface BuildInfo {
  version: string;
  revision: string;
  status: string;
  runtime: string;
  /** ISTIO_RELEASE and ISTIO_COMMIT: the Istio agent this build stands in for. */
  istioVersion: string;
  istioCommit: string;
}

export function buildInfo(): BuildInfo {
  return {
    version: typeof AGENT_BUILD_VERSION === "string" ? AGENT_BUILD_VERSION : "dev",
    revision: typeof AGENT_BUILD_COMMIT === "string" ? AGENT_BUILD_COMMIT : "unknown",
    status: typeof AGENT_BUILD_STATUS === "string" ? AGENT_BUILD_STATUS : "Modified",
    runtime: `bun${typeof Bun !== "undefined" ? Bun.version : "?"}`,
    istioVersion: ISTIO_RELEASE,
    istioCommit: ISTIO_COMMIT,
  };
}
