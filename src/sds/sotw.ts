// Istio's State-of-the-World decision for one SDS request (pkg/xds ShouldRespond), as a pure
// function of the stream's state and the request. Order: NACK ⇒ no response; empty names ⇒
// unsubscribe; first request or empty nonce ⇒ respond with all requested names; stale nonce ⇒
// ignore; ACK with the same names ⇒ ignore; added names ⇒ respond with only the added ones.

export interface SotwStreamState {
  /** Names the client watches. */
  watched: ReadonlySet<string>;
  /** Nonce of the last response sent; undefined before the first. */
  lastNonce: string | undefined;
  /** True once a request was handled on this stream. */
  seenRequest: boolean;
}

export type SotwDecision =
  | { action: "nack"; watched: ReadonlySet<string> }
  | { action: "ignore"; reason: "stale nonce" | "ack" | "removed names"; watched: ReadonlySet<string> }
  | { action: "unsubscribe"; watched: ReadonlySet<string> }
  | { action: "respond"; names: string[]; watched: ReadonlySet<string> };

export function sotwDecide(s: SotwStreamState, req: { resourceNames: string[]; responseNonce: string; errorDetail?: unknown }): SotwDecision {
  if (req.errorDetail) return { action: "nack", watched: s.watched };
  const names = [...new Set(req.resourceNames)];
  if (names.length === 0) return { action: "unsubscribe", watched: new Set() };
  const watched = new Set(names);
  if (!s.seenRequest || req.responseNonce === "") return { action: "respond", names, watched };
  if (req.responseNonce !== s.lastNonce) return { action: "ignore", reason: "stale nonce", watched: s.watched };
  const added = names.filter((n) => !s.watched.has(n));
  if (added.length > 0) return { action: "respond", names: added, watched };
  return { action: "ignore", reason: names.length === s.watched.size ? "ack" : "removed names", watched };
}
