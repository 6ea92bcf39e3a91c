// Watching certificate files. Each file's directory is watched (not the file: editors and
// Kubernetes replace files rather than write them). A Kubernetes secret mount swaps the `..data`
// symlink to a new timestamped directory; that shows as an event on `..data` in the watched
// directory, so every file there is reconsidered (Istio #59912: missed on 2nd+ rotation when only
// the file was watched). A symlinked file's target directory is watched too, except system
// directories, and so is the directory holding each link of its symlink chain: a stable name
// linked to a file of another Kubernetes-style mount (cert-manager csi-lib) is republished by a
// `..data` swap in that other directory (Istio #61161: every rotation after the first missed).
// After each change the chains are resolved again, so the new timestamped directory is watched
// and the removed one forgotten. Events are debounced (FILE_DEBOUNCE_DURATION); the owner
// re-reads and compares.

import { existsSync, lstatSync, readlinkSync, realpathSync, watch, type FSWatcher } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { Clock, TimerHandle } from "../lib/clock.ts";

const SYSTEM_DIRS = ["/var", "/tmp", "/usr", "/etc", "/"];
/** Links followed in one path before giving up (the kernel's own limit for a lookup). */
const MAX_LINKS = 40;

/**
 * The directories holding the symbolic links met while resolving `path` (the file itself or any
 * directory on the way, e.g. `..data`), system directories left out: a link retargeted there
 * changes what `path` names.
 */
export function linkDirectories(path: string): string[] {
  const out = new Set<string>();
  let parts = resolve(path).split("/").filter(Boolean);
  let dir = "/";
  let links = 0;
  for (let i = 0; i < parts.length;) {
    const next = join(dir, parts[i]!);
    let link: string;
    try {
      if (!lstatSync(next).isSymbolicLink()) {
        dir = next;
        i++;
        continue;
      }
      link = readlinkSync(next);
    } catch {
      break;
    }
    if (++links > MAX_LINKS) break;
    if (!SYSTEM_DIRS.includes(dir)) out.add(dir);
    parts = [...resolve(dir, link).split("/").filter(Boolean), ...parts.slice(i + 1)];
    dir = "/";
    i = 0;
  }
  return [...out];
}

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
    for (const dir of linkDirectories(abs)) this.addDir(dir, abs);
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
      const files = [...d.files];
      this.refresh(files);
      this.deps.onChange(files);
    });
  }

  /** Forget watched directories that are gone (a replaced timestamped directory); resolve `files` again. */
  private refresh(files: string[]): void {
    for (const [dir, d] of this.dirs)
      if (d.watcher && !existsSync(dir)) {
        d.watcher.close();
        this.dirs.delete(dir);
      }
    for (const f of files) this.add(f);
  }
}
