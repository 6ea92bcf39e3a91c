// Incremental (Delta) ADS for one client stream, as a pure state machine. The server remembers,
// per type, which version of each resource the client has (seeded from
// initial_resource_versions on reconnect) and sends only resources whose version differs, plus
// removed_resources for names the client has or asked for that the file does not (or no longer)
// define. Subscriptions: `*` (or, for Listener/Cluster, a first request naming nothing) is
// wildcard; resource_names_unsubscribe removes names (`*` ends wildcard). A request with
// error_detail is a NACK: logged, subscription changes in it still applied.

import { isWildcardType } from "./kinds.ts";
import { resourcesOf, type Resource, type Snapshot } from "./snapshot.ts";
import type { StepResult } from "./sotw.ts";

export interface DeltaRequest {
  typeUrl: string;
  subscribe: string[];
  unsubscribe: string[];
  initialVersions: Record<string, string>;
  responseNonce: string;
  errorDetail?: { code: number; message: string };
}

export interface DeltaResponse {
  typeUrl: string;
  systemVersionInfo: string;
  nonce: string;
  resources: Resource[];
  removed: string[];
}

export type DeltaEvent = { kind: "ack"; typeUrl: string; nonce: string } | { kind: "nack"; typeUrl: string; nonce: string; message: string };

/** Marks a name the client was told does not exist. */
const ABSENT = "";

interface TypeState {
  wildcard: boolean;
  names: Set<string>;
  /** name -> version the client has (ABSENT: told it does not exist). */
  known: Map<string, string>;
}

export class DeltaStream {
  private readonly types = new Map<string, TypeState>();

  constructor(private readonly nextNonce: () => string) {}

  onRequest(req: DeltaRequest, snap: Snapshot): StepResult<DeltaResponse, DeltaEvent> {
    const events: DeltaEvent[] = [];
    if (req.responseNonce) {
      events.push(
        req.errorDetail
          ? { kind: "nack", typeUrl: req.typeUrl, nonce: req.responseNonce, message: req.errorDetail.message }
          : { kind: "ack", typeUrl: req.typeUrl, nonce: req.responseNonce },
      );
    }
    let st = this.types.get(req.typeUrl);
    const first = !st;
    if (!st) {
      st = { wildcard: false, names: new Set(), known: new Map(Object.entries(req.initialVersions)) };
      this.types.set(req.typeUrl, st);
      if (isWildcardType(req.typeUrl) && req.subscribe.length === 0) st.wildcard = true;
    }
    for (const n of req.subscribe) {
      if (n === "*") {
        st.wildcard = true;
        continue;
      }
      // A (re-)subscription is answered even if we believe the client has the resource.
      if (!st.names.has(n) && !(first && n in req.initialVersions)) st.known.delete(n);
      st.names.add(n);
    }
    for (const n of req.unsubscribe) {
      if (n === "*") st.wildcard = false;
      else {
        st.names.delete(n);
        st.known.delete(n);
      }
    }
    if (!st.wildcard) {
      // With wildcard gone, the client drops what it no longer subscribes to.
      for (const n of [...st.known.keys()]) if (!st.names.has(n)) st.known.delete(n);
    }
    const res = this.diff(req.typeUrl, st, snap);
    const answerEmpty = first && st.wildcard;
    return { responses: res || answerEmpty ? [this.respond(req.typeUrl, st, snap, res ?? { resources: [], removed: [] })] : [], events };
  }

  /** A new snapshot: responses carrying only what changed for each subscribed type. */
  onSnapshot(snap: Snapshot): DeltaResponse[] {
    const out: DeltaResponse[] = [];
    for (const [typeUrl, st] of this.types) {
      const res = this.diff(typeUrl, st, snap);
      if (res) out.push(this.respond(typeUrl, st, snap, res));
    }
    return out;
  }

  private diff(typeUrl: string, st: TypeState, snap: Snapshot): { resources: Resource[]; removed: string[] } | undefined {
    const all = resourcesOf(snap, typeUrl);
    const resources: Resource[] = [];
    const removed: string[] = [];
    const inScope = [...new Set([...(st.wildcard ? all.keys() : []), ...st.names])].sort();
    for (const name of inScope) {
      const r = all.get(name);
      const has = st.known.get(name);
      if (r && has !== r.version) resources.push(r);
      else if (!r && has !== ABSENT) removed.push(name);
    }
    for (const name of st.known.keys()) {
      if (!all.has(name) && st.known.get(name) !== ABSENT && !st.names.has(name)) removed.push(name);
    }
    return resources.length || removed.length ? { resources, removed } : undefined;
  }

  private respond(typeUrl: string, st: TypeState, snap: Snapshot, d: { resources: Resource[]; removed: string[] }): DeltaResponse {
    for (const r of d.resources) st.known.set(r.name, r.version);
    for (const n of d.removed) {
      if (st.names.has(n)) st.known.set(n, ABSENT);
      else st.known.delete(n);
    }
    return { typeUrl, systemVersionInfo: snap.version, nonce: this.nextNonce(), resources: d.resources, removed: d.removed };
  }
}
