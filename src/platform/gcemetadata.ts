// A client of the GCE metadata server as Google's Go package (cloud.google.com/go/compute/metadata)
// speaks to it, which is what Istio uses: http://<GCE_METADATA_HOST or 169.254.169.254>/computeMetadata/v1/<suffix>
// with `Metadata-Flavor: Google`; 404 means "not defined", any other non-200 is an error.
// Also the "are we on GCE" test: GCE_METADATA_HOST set, or the metadata IP answering with the
// `Metadata-Flavor: Google` header, or metadata.google.internal resolving to it.

import { endpointsOf, type PlatformDeps } from "./types.ts";
import { systemClock, type TimerHandle } from "../lib/clock.ts";

/** What the client uses of the platform edges. */
export type GceClientDeps = Pick<PlatformDeps, "http" | "readSystemFile" | "lookupHost" | "endpoints" | "clock">;

const USER_AGENT = "gcloud-golang/0.1";
/** The Go client's dial timeout; also the "worst case" of its OnGCE probe. */
export const GCE_PROBE_TIMEOUT_MS = 2_000;
/** Per-request bound for metadata values (Istio's platform timeout). */
export const GCE_REQUEST_TIMEOUT_MS = 5_000;
const METADATA_IP = "169.254.169.254";

export class GceNotDefinedError extends Error {
  constructor(suffix: string) {
    super(`GCE metadata "${suffix}" not defined`);
    this.name = "GceNotDefinedError";
  }
}

export class GceMetadataClient {
  constructor(
    private readonly deps: GceClientDeps,
    /** GCE_METADATA_HOST ("" = the default host). */
    private readonly hostOverride: string,
  ) {}

  /** host[:port] requests go to. */
  get host(): string {
    return this.hostOverride || endpointsOf(this.deps).gceHost;
  }

  async get(suffix: string, timeoutMs = GCE_REQUEST_TIMEOUT_MS): Promise<string> {
    const url = `http://${this.host}/computeMetadata/v1/${suffix}`;
    const res = await this.deps.http({ url, headers: { "Metadata-Flavor": "Google", "User-Agent": USER_AGENT }, timeoutMs });
    if (res.status === 404) throw new GceNotDefinedError(suffix);
    if (res.status !== 200) throw new Error(`GCE metadata "${suffix}": status ${res.status}`);
    return res.body;
  }

  async getTrimmed(suffix: string, timeoutMs?: number): Promise<string> {
    return (await this.get(suffix, timeoutMs)).trim();
  }

  /** instance/zone is `projects/<number>/zones/<zone>`: the last segment. */
  async zone(timeoutMs?: number): Promise<string> {
    const z = await this.getTrimmed("instance/zone", timeoutMs);
    return z.slice(z.lastIndexOf("/") + 1);
  }

  private onGCEResult: Promise<boolean> | undefined;

  /** OnGCE: the Go package's test, with its two parallel strategies; run once per client, as Go runs it once per process. */
  onGCE(): Promise<boolean> {
    this.onGCEResult ??= this.testOnGCE();
    return this.onGCEResult;
  }

  private async testOnGCE(): Promise<boolean> {
    if (this.hostOverride !== "") return true;
    const ep = endpointsOf(this.deps);
    const byHttp = this.deps
      .http({ url: `http://${ep.gceHost}`, headers: { "User-Agent": USER_AGENT }, timeoutMs: GCE_PROBE_TIMEOUT_MS })
      .then((r) => r.headers.get("Metadata-Flavor") === "Google")
      .catch(() => false);
    const byDns = this.deps
      .lookupHost("metadata.google.internal.", GCE_PROBE_TIMEOUT_MS)
      .then((addrs) => addrs.includes(METADATA_IP))
      .catch(() => false);
    const first = new Promise<boolean>((resolve) => {
      void byHttp.then(resolve);
      void byDns.then(resolve);
    });
    if (!this.systemInfoSuggestsGCE()) return first;
    // The BIOS says GCE: a "no" from the faster probe waits (up to 5 s) for the other one.
    if (await first) return true;
    const both = Promise.all([byHttp, byDns]).then(([a, b]) => a || b);
    let timer: TimerHandle | undefined;
    const timeout = new Promise<boolean>((r) => (timer = (this.deps.clock ?? systemClock).timer(5_000, () => r(false))));
    return Promise.race([both, timeout]).finally(() => timer?.cancel());
  }

  private systemInfoSuggestsGCE(): boolean {
    const name = (this.deps.readSystemFile("/sys/class/dmi/id/product_name") ?? "").trim();
    return name === "Google" || name === "Google Compute Engine";
  }
}
