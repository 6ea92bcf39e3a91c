// An istiod upstream whose streams wait for the credential fetcher before dialing: the fetcher
// writes the token where the dial reads it (./var/run/secrets/tokens/istio-token), so the first
// xDS stream of a VM without a Kubernetes token already carries the metadata server's token.
// Writes made while waiting are queued in order; a failed fetch dials anyway (no token header,
// as Istio's relay does when no token can be had) after logging the reason.

import type { TokenSource } from "../ca/token.ts";
import type { Logger } from "../lib/log.ts";
import type { AgentConfig } from "../config/agentconfig.ts";
import { IstiodUpstream, nodeFiles, type StreamMeta, type Upstream, type UpstreamHandlers, type UpstreamStream } from "../xds/upstream.ts";
import { dialConfigFrom } from "../xds/upstream-config.ts";
import { errorMessage } from "../lib/errors.ts";

export class TokenFirstUpstream implements Upstream {
  constructor(
    private readonly inner: Upstream,
    private readonly tokens: TokenSource,
    private readonly log: Logger,
  ) {}

  get describe(): string {
    return this.inner.describe;
  }

  open(meta: StreamMeta, handlers: UpstreamHandlers): UpstreamStream {
    let inner: UpstreamStream | undefined;
    let closed = false;
    let paused = false;
    const queued: Uint8Array[] = [];
    void this.tokens
      .token()
      .catch((e: unknown) => this.log.warn(`xDS: no token from ${this.tokens.describe}: ${errorMessage(e)}`))
      .then(() => {
        if (closed) return handlers.onClose({ code: 1, message: "stream closed by the agent" }, false);
        inner = this.inner.open(meta, handlers);
        if (paused) inner.pause();
        for (const b of queued.splice(0)) inner.write(b);
      });
    return {
      write: (bytes) => {
        if (inner) return inner.write(bytes);
        queued.push(bytes);
        return true;
      },
      pause: () => (inner ? inner.pause() : void (paused = true)),
      resume: () => (inner ? inner.resume() : void (paused = false)),
      close: () => {
        if (inner) inner.close();
        else closed = true;
      },
    };
  }
}

/** The istiod upstream of the agent's config, its streams waiting for `tokens`. */
export function tokenFirstIstiodUpstream(cfg: AgentConfig, tokens: TokenSource, log: Logger): Upstream {
  return new TokenFirstUpstream(new IstiodUpstream(dialConfigFrom(cfg, nodeFiles)), tokens, log);
}
