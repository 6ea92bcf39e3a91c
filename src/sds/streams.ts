// One SDS stream's protocol handling, independent of gRPC plumbing: SotW (StreamSecrets) with
// Istio's semantics, and Delta (DeltaSecrets, beyond Istio). Each handler serialises its sends so
// pushes and responses never interleave; a generation failure ends the stream with a status.

import { randomUUID } from "node:crypto";
import type { Logger } from "../lib/log.ts";
import type { Clock } from "../lib/clock.ts";
import { SdsError } from "./errors.ts";
import { toResource, type SecretItem } from "./item.ts";
import type { DeltaDiscoveryRequest, DeltaResource, DiscoveryRequest, SdsServerCodec, SecretResource } from "./wire.ts";
import { parseResourceName } from "./resources.ts";
import { sotwDecide } from "./sotw.ts";
import type { PilotXdsMetrics } from "../lib/pilot-xds-metrics.ts";
import { errorMessage } from "../lib/errors.ts";

export interface SecretSource {
  /** `signal` aborts when the requester (the stream) goes away: file reads for it stop. */
  get(name: string, signal?: AbortSignal): Promise<SecretItem>;
  crlFor(name: string): string | undefined;
}

export interface StreamIo {
  send(frame: Buffer): void;
  /** End the stream with a gRPC status; `invalid` = the client asked for something malformed. */
  fail(err: Error, invalid: boolean): void;
}

export interface StreamCtx {
  codec: SdsServerCodec;
  secrets: SecretSource;
  log: Logger;
  clock: Clock;
  /** Monotonic counter shared by the server for version_info. */
  nextVersion: () => string;
  /** Istio's pilot_xds_* metrics for this server (type "sds"). */
  xdsMetrics?: PilotXdsMetrics;
}

export async function resourcesFor(ctx: StreamCtx, names: string[], signal?: AbortSignal): Promise<SecretResource[]> {
  const out: SecretResource[] = [];
  for (const n of names) out.push(toResource(await ctx.secrets.get(n, signal), ctx.secrets.crlFor(n)));
  return out;
}

export function isInvalid(e: unknown): boolean {
  return e instanceof SdsError && e.resource !== undefined && parseResourceName(e.resource).kind === "invalid";
}

export class SotwStream {
  private watched: ReadonlySet<string> = new Set();
  private lastNonce: string | undefined;
  private seen = false;
  private queue: Promise<void> = Promise.resolve();
  private dead = false;
  private readonly gone = new AbortController();

  constructor(
    private readonly ctx: StreamCtx,
    private readonly io: StreamIo,
    readonly id: string,
  ) {}

  watches(name: string): boolean {
    return this.watched.has(name);
  }

  onRequest(req: DiscoveryRequest): void {
    const d = sotwDecide({ watched: this.watched, lastNonce: this.lastNonce, seenRequest: this.seen }, req);
    this.seen = true;
    this.watched = d.watched;
    switch (d.action) {
      case "nack":
        this.ctx.xdsMetrics?.totalRejects.inc({ type: "sds" });
        this.ctx.log.warn(`SDS: Envoy rejected ${[...this.watched].join(",")}: ${(req.errorDetail as { message?: string }).message ?? ""}`, { conn: this.id });
        return;
      case "unsubscribe":
        this.ctx.log.debug("SDS: client unsubscribed", { conn: this.id });
        return;
      case "ignore":
        if (d.reason === "stale nonce") this.ctx.xdsMetrics?.expiredNonce.inc({ type: "sds" });
        this.ctx.log.debug(`SDS: request ignored (${d.reason})`, { conn: this.id });
        return;
      case "respond":
        this.enqueue(d.names);
    }
  }

  push(name: string): void {
    if (this.watched.has(name)) this.enqueue([name]);
  }

  private enqueue(names: string[]): void {
    this.queue = this.queue.then(async () => {
      if (this.dead) return;
      try {
        const resources = await resourcesFor(this.ctx, names, this.gone.signal);
        if (this.dead) return;
        const nonce = randomUUID();
        this.lastNonce = nonce;
        const frame = this.ctx.codec.encodeResponse({ versionInfo: this.ctx.nextVersion(), nonce, resources });
        const sent = this.ctx.clock.now();
        this.io.send(frame);
        this.ctx.xdsMetrics?.sendTime.observe((this.ctx.clock.now() - sent) / 1000);
        this.ctx.log.debug(`SDS: pushed ${names.join(",")}`, { conn: this.id });
      } catch (e) {
        if (this.dead) return; // the stream went away while its secrets were read
        this.dead = true;
        this.ctx.log.warn(`SDS: generating ${names.join(",")} failed: ${errorMessage(e)}`, { conn: this.id });
        this.io.fail(e as Error, isInvalid(e));
      }
    });
  }

  close(): void {
    this.dead = true;
    this.gone.abort(new Error(`SDS stream ${this.id} closed`));
  }
}

export class DeltaStream {
  private readonly subscribed = new Set<string>();
  /** Version the client has of each name. */
  private readonly sent = new Map<string, string>();
  private queue: Promise<void> = Promise.resolve();
  private dead = false;
  private first = true;
  private readonly gone = new AbortController();

  constructor(
    private readonly ctx: StreamCtx,
    private readonly io: StreamIo,
    readonly id: string,
  ) {}

  watches(name: string): boolean {
    return this.subscribed.has(name);
  }

  onRequest(req: DeltaDiscoveryRequest): void {
    if (req.errorDetail) {
      this.ctx.log.warn(`SDS (delta): Envoy rejected a response: ${req.errorDetail.message}`, { conn: this.id });
      return;
    }
    if (this.first) {
      for (const [n, v] of Object.entries(req.initialResourceVersions)) this.sent.set(n, v);
      this.first = false;
    }
    for (const n of req.resourceNamesUnsubscribe) {
      this.subscribed.delete(n);
      this.sent.delete(n);
    }
    const fresh = req.resourceNamesSubscribe.filter((n) => n !== "*");
    for (const n of fresh) this.subscribed.add(n);
    if (fresh.length > 0) this.enqueue(fresh);
  }

  push(name: string): void {
    if (this.subscribed.has(name)) this.enqueue([name]);
  }

  private enqueue(names: string[]): void {
    this.queue = this.queue.then(async () => {
      if (this.dead) return;
      const resources: DeltaResource[] = [];
      const removed: string[] = [];
      try {
        for (const n of names) {
          if (!this.subscribed.has(n)) continue;
          if (parseResourceName(n).kind === "invalid") {
            removed.push(n); // no such resource: tell the client instead of failing the stream
            continue;
          }
          const item = await this.ctx.secrets.get(n, this.gone.signal);
          if (this.sent.get(n) === item.version) continue;
          resources.push({ name: n, version: item.version, secret: toResource(item, this.ctx.secrets.crlFor(n)) });
        }
      } catch (e) {
        if (this.dead) return;
        this.dead = true;
        this.ctx.log.warn(`SDS (delta): generating ${names.join(",")} failed: ${errorMessage(e)}`, { conn: this.id });
        this.io.fail(e as Error, false);
        return;
      }
      if (this.dead || (resources.length === 0 && removed.length === 0)) return;
      for (const r of resources) this.sent.set(r.name, r.version);
      this.io.send(this.ctx.codec.encodeDeltaResponse({ systemVersionInfo: this.ctx.nextVersion(), nonce: randomUUID(), resources, removed }));
    });
  }

  close(): void {
    this.dead = true;
    this.gone.abort(new Error(`SDS stream ${this.id} closed`));
  }
}
