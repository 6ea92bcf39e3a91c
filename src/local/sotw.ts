// State-of-the-world ADS for one client stream, as a pure state machine: requests and new
// snapshots in, responses and events out (the gRPC shell encodes and logs them).
//
// Rules (Envoy's xDS protocol, as Istio's ShouldRespond applies them):
// - a request carrying error_detail is a NACK: recorded, nothing sent (the next change retries);
// - a request whose response_nonce is not the last one sent for its type is stale: ignored;
// - the first request of a type (no nonce) is always answered, even with an empty set, so the
//   client can finish initialising;
// - an ACK that changes the subscription is answered with the new set; a plain ACK is not;
// - Listener and Cluster treat an empty resource_names as wildcard until the client names
//   resources; `*` is wildcard for any type; otherwise an empty list unsubscribes;
// - every response carries the full subscribed set of its type (SotW), and a new snapshot is
//   pushed only to the types whose subscribed set actually changed.

import { isWildcardType } from "./kinds.ts";
import { resourcesOf, setVersion, type Resource, type Snapshot } from "./snapshot.ts";

export interface SotwRequest {
  typeUrl: string;
  versionInfo: string;
  resourceNames: string[];
  responseNonce: string;
  errorDetail?: { code: number; message: string };
}

export interface SotwResponse {
  typeUrl: string;
  versionInfo: string;
  nonce: string;
  resources: Resource[];
}

export type SotwEvent =
  | { kind: "ack"; typeUrl: string; version: string; nonce: string }
  | { kind: "nack"; typeUrl: string; version: string; nonce: string; message: string }
  | { kind: "stale"; typeUrl: string; nonce: string }
  | { kind: "unsubscribed"; typeUrl: string };

interface TypeState {
  wildcard: boolean;
  /** True until the client names resources for a wildcard type (legacy wildcard). */
  legacyWildcard: boolean;
  names: Set<string>;
  lastNonce?: string;
  lastSet?: string;
  ackedVersion?: string;
}

export interface StepResult<R, E> {
  responses: R[];
  events: E[];
}

export class SotwStream {
  private readonly types = new Map<string, TypeState>();

  constructor(private readonly nextNonce: () => string) {}

  onRequest(req: SotwRequest, snap: Snapshot): StepResult<SotwResponse, SotwEvent> {
    const events: SotwEvent[] = [];
    let st = this.types.get(req.typeUrl);
    if (req.responseNonce && st && req.responseNonce !== st.lastNonce) {
      return { responses: [], events: [{ kind: "stale", typeUrl: req.typeUrl, nonce: req.responseNonce }] };
    }
    if (req.errorDetail) {
      events.push({ kind: "nack", typeUrl: req.typeUrl, version: req.versionInfo, nonce: req.responseNonce, message: req.errorDetail.message });
      return { responses: [], events };
    }
    const first = !st || !req.responseNonce;
    if (!st) {
      st = { wildcard: false, legacyWildcard: isWildcardType(req.typeUrl), names: new Set() };
      this.types.set(req.typeUrl, st);
    }
    if (req.responseNonce) {
      st.ackedVersion = req.versionInfo;
      events.push({ kind: "ack", typeUrl: req.typeUrl, version: req.versionInfo, nonce: req.responseNonce });
    }
    const names = req.resourceNames.filter((n) => n !== "*");
    if (names.length) st.legacyWildcard = false;
    const wildcard = req.resourceNames.includes("*") || (req.resourceNames.length === 0 && st.legacyWildcard);
    const changed = wildcard !== st.wildcard || names.length !== st.names.size || names.some((n) => !st!.names.has(n));
    st.wildcard = wildcard;
    st.names = new Set(names);
    if (!st.wildcard && st.names.size === 0) {
      st.lastSet = undefined;
      if (changed) events.push({ kind: "unsubscribed", typeUrl: req.typeUrl });
      return { responses: [], events };
    }
    if (!first && !changed) return { responses: [], events };
    return { responses: [this.respond(req.typeUrl, st, snap)], events };
  }

  /** A new snapshot: responses for the subscribed types whose subscribed set changed. */
  onSnapshot(snap: Snapshot): SotwResponse[] {
    const out: SotwResponse[] = [];
    for (const [typeUrl, st] of this.types) {
      if (st.lastSet === undefined) continue; // never answered or unsubscribed
      if (setVersion(this.selected(typeUrl, st, snap)) !== st.lastSet) out.push(this.respond(typeUrl, st, snap));
    }
    return out;
  }

  /** The version the client last ACKed for a type (for status/debug). */
  acked(typeUrl: string): string | undefined {
    return this.types.get(typeUrl)?.ackedVersion;
  }

  private selected(typeUrl: string, st: TypeState, snap: Snapshot): Resource[] {
    const all = resourcesOf(snap, typeUrl);
    if (st.wildcard) return [...all.values()];
    return [...st.names].sort().flatMap((n) => {
      const r = all.get(n);
      return r ? [r] : [];
    });
  }

  private respond(typeUrl: string, st: TypeState, snap: Snapshot): SotwResponse {
    const resources = this.selected(typeUrl, st, snap);
    const versionInfo = setVersion(resources);
    const nonce = this.nextNonce();
    st.lastNonce = nonce;
    st.lastSet = versionInfo;
    return { typeUrl, versionInfo, nonce, resources };
  }
}
