// The local xDS file as a live source of snapshots: loads it once (a bad file at start is an
// error), then watches it — inotify on its directory (catches editors' rename-over and
// Kubernetes' `..data` symlink swaps), or a stat poll where the directory cannot be watched — and
// reloads after a short debounce. While inotify works nothing runs periodically: an idle agent
// does not wake up for the file (a timer's allocations would also keep Bun's GC timer at 1 Hz). A file that fails to parse is rejected with one line naming the file and
// the resource; the last good snapshot stays current. Reloads are serialised. The conversion
// itself (YAML/JSON to encoded resources) is the injected Converter's: in the agent, a short-lived
// copy of itself (converter.ts), so this process holds the file's encoded resources and a hash of
// its bytes, not the bytes, nor yaml, protobufjs or the schemas. When the converter fails (not the
// file), the same bytes are tried again after 1 s, doubling up to 30 s, while the file is watched.

import { createHash } from "node:crypto";
import { watch as fsWatch, type FSWatcher } from "node:fs";
import { stat as fsStat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import type { Logger } from "../lib/log.ts";
import { LocalXdsError } from "./errors.ts";
import { LocalXdsConvertError, type Converter } from "./converter.ts";
import { shortType } from "./kinds.ts";
import { diffSnapshots, EMPTY_SNAPSHOT, type Snapshot, type TypeChange } from "./snapshot.ts";
import { FILE_LIMITS, readBoundedFile } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export interface XdsFileSourceOptions {
  /** Absolute path to read. */
  path: string;
  /** The path as the user gave it, for messages. */
  displayPath: string;
  /** The file's bytes to a snapshot (converter.ts). */
  convert: Converter;
  /** The agent is stopping: a conversion under way is stopped. */
  signal?: AbortSignal;
  log: Logger;
  /** Quiet time after a change event before reloading (ms). */
  debounceMs?: number;
  /** Stat poll interval (ms) when the directory cannot be watched; 0 disables polling. */
  pollMs?: number;
  /** The file system's watch and stat (tests count or fail them); node:fs's by default. */
  fs?: {
    watch: (dir: string, onChange: (event: string, filename: string | null) => void) => FSWatcher;
    stat: (path: string) => Promise<{ ino: number; size: number; mtimeMs: number }>;
  };
  /** Called after each reload attempt (metrics); "failed": the converter failed, not the file. */
  onReload?: (result: "ok" | "unchanged" | "rejected" | "failed") => void;
  /** Called with each newly rejected file (not again for the same bad text). */
  onRejected?: (error: LocalXdsError) => void;
}

export type ReloadResult = { ok: true; snapshot: Snapshot; changes: TypeChange[] } | { ok: false; error: LocalXdsError };

/** The first and the longest wait before the same bytes are converted again after the converter failed. */
export const CONVERT_RETRY_MS = { first: 1000, max: 30_000 } as const;

/** A digest of the file's bytes: "unchanged" and "the same bad file" without keeping the bytes. */
function digest(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

export class XdsFileSource {
  private snapshot: Snapshot = EMPTY_SNAPSHOT;
  /** Digest of the bytes the current snapshot came from. */
  private lastText?: string;
  /** The last rejected bytes' digest (undefined: unreadable) and why: the same problem is not reported again. */
  private lastRejected?: { text?: string; error: LocalXdsError };
  /** The wait before the next retry after the converter failed. */
  private retryMs: number = CONVERT_RETRY_MS.first;
  /** Set while the file is watched: reload after `ms`. */
  private retryLater?: (ms: number) => void;
  private chain: Promise<unknown> = Promise.resolve();
  private listeners = new Set<(s: Snapshot, changes: TypeChange[]) => void>();

  constructor(private readonly opts: XdsFileSourceOptions) {}

  current(): Snapshot {
    return this.snapshot;
  }

  /** Called after the first good load and after every load that changed resources. */
  onUpdate(fn: (s: Snapshot, changes: TypeChange[]) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Read and parse the file now; on success make it current and notify listeners. */
  reload(): Promise<ReloadResult> {
    const next = this.chain.then(() => this.reloadNow());
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async reloadNow(): Promise<ReloadResult> {
    const { path, displayPath, log } = this.opts;
    let bytes: Uint8Array;
    try {
      bytes = await readBoundedFile(path, { maxBytes: FILE_LIMITS.localXds });
    } catch (e) {
      const error = new LocalXdsError(`${displayPath}: cannot read: ${(e as NodeJS.ErrnoException).code ?? errorMessage(e)}`, displayPath, undefined, {
        cause: e,
      });
      if (this.lastRejected && this.lastRejected.text === undefined && this.lastRejected.error.message === error.message) return { ok: false, error };
      this.lastRejected = { error };
      return this.rejected(error);
    }
    const text = digest(bytes);
    if (text === this.lastText) {
      this.opts.onReload?.("unchanged");
      return { ok: true, snapshot: this.snapshot, changes: [] };
    }
    if (this.lastRejected && text === this.lastRejected.text) return { ok: false, error: this.lastRejected.error };
    let snap: Snapshot;
    try {
      snap = await this.opts.convert(displayPath, bytes, this.opts.signal);
    } catch (e) {
      if (e instanceof LocalXdsConvertError) return this.convertFailed(e);
      if (!(e instanceof LocalXdsError)) throw e;
      this.retryMs = CONVERT_RETRY_MS.first;
      this.lastRejected = { text, error: e };
      return this.rejected(e);
    }
    this.retryMs = CONVERT_RETRY_MS.first;
    const first = this.lastText === undefined;
    this.lastText = text;
    this.lastRejected = undefined;
    const changes = diffSnapshots(this.snapshot, snap);
    this.snapshot = snap;
    this.opts.onReload?.(changes.length || first ? "ok" : "unchanged");
    if (changes.length || first) {
      const what = changes.map((c) => `${shortType(c.typeUrl)} ${[...c.changed.map((n) => `~${n}`), ...c.removed.map((n) => `-${n}`)].join(" ")}`).join("; ");
      const line = `local xDS: loaded ${displayPath} version ${snap.version}: ${what || "no resources"}`;
      if (first) log.debug(line);
      else log.info(line);
      for (const fn of this.listeners) fn(snap, changes);
    } else {
      log.debug(`local xDS: ${displayPath} changed but its resources did not`);
    }
    return { ok: true, snapshot: snap, changes };
  }

  private serving(): string {
    return this.lastText !== undefined ? `still serving version ${this.snapshot.version}` : "nothing to serve until it is fixed";
  }

  private rejected(error: LocalXdsError): ReloadResult {
    this.opts.onReload?.("rejected");
    this.opts.log.error(`local xDS: rejected ${error.message}; ${this.serving()}`);
    this.opts.onRejected?.(error);
    return { ok: false, error };
  }

  /** Not the file's fault: nothing remembered against its bytes; tried again later while watched. */
  private convertFailed(error: LocalXdsConvertError): ReloadResult {
    if (this.opts.signal?.aborted) return { ok: false, error }; // stopping: nothing to report or retry
    this.opts.onReload?.("failed");
    const ms = this.retryMs;
    this.retryMs = Math.min(ms * 2, CONVERT_RETRY_MS.max);
    const retry = this.retryLater ? `; trying again in ${ms / 1000} s` : "";
    this.opts.log.error(`local xDS: cannot load ${error.message}; ${this.serving()}${retry}`);
    this.opts.onRejected?.(error);
    this.retryLater?.(ms);
    return { ok: false, error };
  }

  /** Watch the file until `signal` aborts: inotify on its directory; polling only where that fails. */
  watch(signal: AbortSignal): void {
    const { path, debounceMs = 50, pollMs = 2000, log } = this.opts;
    const fs = this.opts.fs ?? { watch: (dir: string, cb: (event: string, filename: string | null) => void) => fsWatch(dir, cb), stat: fsStat };
    let timer: ReturnType<typeof setTimeout> | undefined;
    const schedule = (ms = debounceMs) => {
      if (signal.aborted) return;
      clearTimeout(timer);
      timer = setTimeout(() => void this.reload(), ms);
    };
    this.retryLater = schedule;
    let poll: ReturnType<typeof setInterval> | undefined;
    let lastStat = "";
    const startPolling = () => {
      if (poll || pollMs <= 0 || signal.aborted) return;
      poll = setInterval(() => {
        fs.stat(path).then(
          (s) => {
            const key = `${s.ino}:${s.size}:${s.mtimeMs}`;
            if (lastStat && key !== lastStat) schedule();
            lastStat = key;
          },
          () => {
            if (lastStat) schedule();
            lastStat = "";
          },
        );
      }, pollMs);
      poll.unref?.();
    };
    const base = basename(path);
    let watcher: FSWatcher | undefined;
    try {
      watcher = fs.watch(dirname(path), (_event, filename) => {
        if (!filename || filename === base || String(filename).startsWith("..")) schedule();
      });
      watcher.on("error", (e: Error) => {
        log.warn(`local xDS: watching ${this.opts.displayPath} failed: ${e.message}; polling it every ${pollMs} ms`, ids({ path: this.opts.displayPath }));
        schedule(); // a change may have been missed
        startPolling();
      });
    } catch (e) {
      log.warn(`local xDS: cannot watch ${this.opts.displayPath}: ${errorMessage(e)}; polling it every ${pollMs} ms`, ids({ path: this.opts.displayPath }));
      startPolling();
    }
    signal.addEventListener(
      "abort",
      () => {
        this.retryLater = undefined;
        clearTimeout(timer);
        clearInterval(poll);
        watcher?.close();
      },
      { once: true },
    );
  }
}
