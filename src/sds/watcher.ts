// Watching certificate files. Each file's directory is watched (not the file: editors and
// Kubernetes replace files rather than write them). A Kubernetes secret mount swaps the `..data`
// symlink to a new timestamped directory; that shows as an event on `..data` in the watched
// directory, so every file there is reconsidered (Istio #59912: missed on 2nd+ rotation when only
// the file was watched). A symlinked file's target directory is watched too, except system
// directories. Events are debounced (FILE_DEBOUNCE_DURATION); the owner re-reads and compares.

import { watch, realpathSync, type FSWatcher } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Clock, TimerHandle } from "../lib/clock.ts";

const SYSTEM_DIRS = ["/var", "/tmp", "/usr", "/etc", "/"];

export interface WatcherDeps {
  clock: Clock;
  debounceMs: number;
  /** Files under `dir` may have changed. */
  onChange: (paths: string[]) => void;
  /** A directory could not be watched. */
  onError: (dir: string, err: Error) => void;
}

export class CertFileWatcher {
  private readonly dirs = new Map<string, { watcher?: FSWatcher; files: Set<string>; pending?: TimerHandle }>();

  constructor(private readonly deps: WatcherDeps) {}

  /** Start watching `path` (idempotent). */
  add(path: string): void {
    const abs = resolve(path);
    this.addDir(dirname(abs), abs);
    try {
      const real = realpathSync(abs);
      const realDir = dirname(real);
      if (real !== abs && !realDir.startsWith(dirname(abs) + "/") && !SYSTEM_DIRS.includes(realDir)) this.addDir(realDir, abs);
    } catch {
      // not there yet: the directory watch reports its creation
    }
  }

  close(): void {
    for (const d of this.dirs.values()) {
      d.pending?.cancel();
      d.watcher?.close();
    }
    this.dirs.clear();
  }

  private addDir(dir: string, file: string): void {
    let d = this.dirs.get(dir);
    if (!d) {
      d = { files: new Set() };
      this.dirs.set(dir, d);
      try {
        d.watcher = watch(dir, { persistent: false }, () => this.fire(dir));
        d.watcher.on("error", (err) => this.deps.onError(dir, err));
      } catch (e) {
        this.deps.onError(dir, e as Error);
      }
    }
    d.files.add(file);
  }

  private fire(dir: string): void {
    const d = this.dirs.get(dir);
    if (!d) return;
    d.pending?.cancel();
    d.pending = this.deps.clock.timer(this.deps.debounceMs, () => {
      d.pending = undefined;
      this.deps.onChange([...d.files]);
    });
  }
}
