// Watches a few files (the custom Envoy config, mounted certificates) by content, for hot-restart
// epochs. Polling the content hash is deliberate: Kubernetes updates mounted secrets by swapping
// a `..data` symlink, which inotify on the file itself misses; a handful of small files read once
// a second costs nothing. A change is reported once the new content has been seen on two
// consecutive polls (a writer in the middle of a write does not trigger a restart).

import { createHash } from "node:crypto";
import { systemClock, type Clock } from "../lib/clock.ts";
import { FILE_LIMITS, readBoundedFile } from "../lib/boundedfile.ts";

export type ReadFileFn = (path: string) => Promise<Uint8Array | undefined>;

const readOrUndefined: ReadFileFn = async (path) => {
  try {
    return await readBoundedFile(path, { maxBytes: FILE_LIMITS.config });
  } catch {
    return undefined;
  }
};

function digest(b: Uint8Array | undefined): string {
  return b === undefined ? "missing" : createHash("sha256").update(b).digest("hex");
}

export interface FileChangeWatcherOptions {
  files: readonly string[];
  intervalMs: number;
  /** The poll interval sleeps on it (tests pass a manual clock). */
  clock?: Clock;
  onChange: (changed: string[]) => void;
  read?: ReadFileFn;
}

export class FileChangeWatcher {
  private readonly read: ReadFileFn;
  /** Content last reported (or the baseline). */
  private readonly settled = new Map<string, string>();
  /** Content seen on the previous poll, not yet reported. */
  private readonly pending = new Map<string, string>();

  constructor(private readonly opts: FileChangeWatcherOptions) {
    this.read = opts.read ?? readOrUndefined;
  }

  /** Take the baseline, then poll until the signal aborts (runs in the background). */
  async start(signal: AbortSignal): Promise<void> {
    for (const f of this.opts.files) this.settled.set(f, digest(await this.read(f)));
    void this.loop(signal);
  }

  /** One poll; returns the files reported as changed. Exposed for tests. */
  async poll(): Promise<string[]> {
    const changed: string[] = [];
    for (const f of this.opts.files) {
      const now = digest(await this.read(f));
      if (now === this.settled.get(f)) {
        this.pending.delete(f);
        continue;
      }
      if (this.pending.get(f) === now) {
        this.settled.set(f, now);
        this.pending.delete(f);
        changed.push(f);
      } else {
        this.pending.set(f, now);
      }
    }
    if (changed.length > 0) this.opts.onChange(changed);
    return changed;
  }

  private async loop(signal: AbortSignal): Promise<void> {
    while (await (this.opts.clock ?? systemClock).sleep(this.opts.intervalMs, signal)) await this.poll();
  }
}
