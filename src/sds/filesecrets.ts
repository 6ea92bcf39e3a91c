// File-backed secrets: `file-cert:`/`file-root:` resources, `file-root:system`, and `default` /
// `ROOTCA` when served from mounted files. Each item is read once (with retry), cached and its
// files watched; on a change the item is re-read and, if its content differs, `onUpdate(name)`
// fires. A failed re-read keeps the previous item (counted, logged). File certs are not rotated
// by time: whoever mounts them rotates them.

import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { Logger } from "../lib/log.ts";
import type { Clock } from "../lib/clock.ts";
import { readCertPair, readRootBundle, withFileRetry } from "./files.ts";
import type { SecretItem } from "./item.ts";
import type { SecretMetrics } from "./metrics.ts";
import { CertFileWatcher } from "./watcher.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

interface Entry {
  paths: string[];
  read: (signal?: AbortSignal) => Promise<SecretItem>;
  item?: SecretItem;
  inflight?: Inflight;
}

/**
 * One read shared by every requester that asks while it runs. It stops (its signal aborts) once
 * every requester that came with a signal has gone away; a requester without one keeps it going.
 */
interface Inflight {
  promise: Promise<SecretItem>;
  controller: AbortController;
  waiting: number;
  pinned: boolean;
}

export interface FileSecretsDeps {
  log: Logger;
  metrics: SecretMetrics;
  clock: Clock;
  debounceMs: number;
  /** How long a failing read is retried (Istio: 10s): a mount can be caught half-swapped. */
  retryTotalMs?: number;
  onUpdate: (name: string) => void;
}

export class FileSecrets {
  private readonly entries = new Map<string, Entry>();
  private readonly watcher: CertFileWatcher;

  constructor(private readonly deps: FileSecretsDeps) {
    this.watcher = new CertFileWatcher({
      clock: deps.clock,
      debounceMs: deps.debounceMs,
      onChange: (paths) => void this.reload(paths),
      onError: (dir, err) => {
        deps.metrics.fileWatcherFailures.inc();
        deps.log.error(`cannot watch certificate directory ${dir}: ${err.message}`);
      },
    });
  }

  /** Read-only: every file-backed resource read so far, with its paths and public certificates (never a key). */
  snapshot(): { name: string; paths: string[]; chainPem?: string; rootPem?: string; createdMs: number; expireMs: number }[] {
    return [...this.entries].map(([name, e]) => ({
      name,
      paths: [...e.paths],
      ...(e.item?.certificateChain ? { chainPem: e.item.certificateChain } : {}),
      ...(e.item?.rootCert ? { rootPem: e.item.rootCert } : {}),
      createdMs: e.item?.createdMs ?? 0,
      expireMs: e.item?.expireMs ?? 0,
    }));
  }

  /** A key/chain pair resource. */
  certPair(name: string, certPath: string, keyPath: string, signal?: AbortSignal): Promise<SecretItem> {
    return this.get(name, [certPath, keyPath], (s) => readCertPair(name, certPath, keyPath, this.deps.clock.now(), s), signal);
  }

  /** A root bundle resource; invalid certificates in the file are skipped with a warning. */
  root(name: string, caPath: string, signal?: AbortSignal): Promise<SecretItem> {
    return this.get(
      name,
      [caPath],
      async (s) => {
        const { item, invalid } = await readRootBundle(name, caPath, s);
        if (invalid > 0) this.deps.log.warn(`${name}: skipped ${invalid} invalid certificate(s) in ${caPath}`, ids({ resource: name, path: caPath }));
        return item;
      },
      signal,
    );
  }

  /** The cached item, if read already. */
  peek(name: string): SecretItem | undefined {
    return this.entries.get(name)?.item;
  }

  close(): void {
    this.watcher.close();
  }

  private async get(name: string, paths: string[], read: (signal?: AbortSignal) => Promise<SecretItem>, signal?: AbortSignal): Promise<SecretItem> {
    let e = this.entries.get(name);
    if (e?.item) return e.item;
    if (!e) {
      e = { paths: paths.map((p) => resolve(p)), read };
      this.entries.set(name, e);
      for (const p of paths) this.watcher.add(p);
    }
    const entry = e;
    const inflight = (entry.inflight ??= this.startRead(name, entry));
    if (!signal) {
      inflight.pinned = true;
      return inflight.promise;
    }
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new Error(`${name}: the requester went away`);
    inflight.waiting++;
    const leave = () => {
      if (--inflight.waiting === 0 && !inflight.pinned) inflight.controller.abort(new Error(`${name}: reading stopped, every requester went away`));
    };
    signal.addEventListener("abort", leave, { once: true });
    return inflight.promise.finally(() => signal.removeEventListener("abort", leave));
  }

  private startRead(name: string, entry: Entry): Inflight {
    const controller = new AbortController();
    const promise = withFileRetry(
      () => entry.read(controller.signal),
      this.deps.clock,
      this.deps.debounceMs,
      this.deps.retryTotalMs ?? 10_000,
      controller.signal,
    )
      .then((item) => {
        entry.item = item;
        if (item.expireMs > 0) this.deps.metrics.setExpiry(name, item.expireMs);
        return item;
      })
      .catch((err) => {
        if (!controller.signal.aborted) this.deps.metrics.fileSecretFailures.inc();
        throw err;
      })
      .finally(() => {
        if (entry.inflight?.controller === controller) entry.inflight = undefined;
      });
    promise.catch(() => undefined); // a read nobody waits for any more must not be an unhandled rejection
    return { promise, controller, waiting: 0, pinned: false };
  }

  private async reload(changed: string[]): Promise<void> {
    const set = new Set(changed.map((p) => resolve(p)));
    for (const [name, e] of this.entries) {
      if (!e.item || !e.paths.some((p) => set.has(p))) continue;
      if (!e.paths.every((p) => existsSync(p))) continue; // mid-swap; the next event completes it
      try {
        const next = await e.read();
        if (next.version === e.item.version) continue;
        e.item = next;
        if (next.expireMs > 0) this.deps.metrics.setExpiry(name, next.expireMs);
        this.deps.log.info(`${name}: certificate files changed, pushing new version`, { files: e.paths.join(",") });
        this.deps.onUpdate(name);
      } catch (err) {
        this.deps.metrics.fileSecretFailures.inc();
        this.deps.log.error(`${name}: re-reading changed files failed, still serving the previous version: ${errorMessage(err)}`);
      }
    }
  }
}
