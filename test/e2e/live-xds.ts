// What the fake istiod serves in the e2e suites: a SotW server over a resource table that can be
// replaced at any time (a config push: every open stream gets the new version of each type it
// subscribed to), and, when `bigPushes` is on, a continuous stream of ~300 KiB Cluster responses
// (big-config.ts, one generation each, paced by the stream's backpressure) to CDS subscribers.

import { once } from "node:events";
import type { AnyResource, FakeStream } from "../support/fake-istiod.ts";
import { encodedBigClusters } from "./big-config.ts";
import { CLUSTER } from "./envoy-resources.ts";

interface Served {
  s: FakeStream;
  open: boolean;
  sent: Map<string, number>;
  pushing: boolean;
}

export class LiveXds {
  private version = 1;
  private readonly streams = new Set<Served>();
  private big = false;
  /** Big responses written so far. */
  bigSent = 0;

  constructor(private table: Map<string, AnyResource[]>) {}

  /** FakeIstiod.onStream */
  readonly attach = (s: FakeStream): void => {
    const st: Served = { s, open: true, sent: new Map(), pushing: false };
    this.streams.add(st);
    void s.closed.then(() => {
      st.open = false;
      this.streams.delete(st);
    });
    s.call.on("data", () => {
      const r = s.requests.at(-1)!;
      if (r.errorDetail) return;
      if (r.typeUrl === CLUSTER && this.big) void this.pushBig(st);
      else this.sendType(st, r.typeUrl);
    });
  };

  /** A config push: `table` replaces the served resources on every open stream. */
  setTable(table: Map<string, AnyResource[]>): void {
    this.table = table;
    this.version++;
    for (const st of this.streams) for (const type of st.sent.keys()) this.sendType(st, type);
  }

  /** Start (or stop) continuous big Cluster pushes to CDS subscribers. */
  bigPushes(on: boolean): void {
    this.big = on;
    if (on) for (const st of this.streams) if (st.sent.has(CLUSTER)) void this.pushBig(st);
  }

  private sendType(st: Served, typeUrl: string): void {
    const res = this.table.get(typeUrl);
    if (!res || !st.open || st.sent.get(typeUrl) === this.version) return;
    st.sent.set(typeUrl, this.version);
    try {
      st.s.send({ typeUrl, versionInfo: String(this.version), resources: res });
    } catch {
      st.open = false; // istiod stopped under it
    }
  }

  private async pushBig(st: Served): Promise<void> {
    if (st.pushing) return;
    st.pushing = true;
    st.sent.set(CLUSTER, -1);
    for (let gen = 1; this.big && st.open; gen++) {
      const flowing = st.s.send({ typeUrl: CLUSTER, versionInfo: `big-${gen}`, resources: encodedBigClusters(gen) });
      this.bigSent++;
      if (!flowing) await Promise.race([once(st.s.call, "drain"), st.s.closed]);
      else await Bun.sleep(10);
    }
    st.pushing = false;
  }
}
