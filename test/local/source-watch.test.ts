// How the local xDS file is watched (issue #16, idle wake-ups): inotify on its directory and no
// periodic stat while that works; a stat poll only where the directory cannot be watched (the
// watch call fails, or the watcher reports an error later).

import { afterAll, afterEach, expect, test } from "bun:test";
import { EventEmitter } from "node:events";
import { mkdirSync, watch, type FSWatcher } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { memoryLogger } from "../../src/lib/log.ts";
import { inProcessConverter } from "../../src/local/converter.ts";
import { XdsFileSource } from "../../src/local/source.ts";
import { fixtureYaml } from "./fixtures.ts";
import { tempDir, writeText } from "./support.ts";

const tmp = tempDir("localxds-watch-");
const stops: AbortController[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s.abort();
});
afterAll(() => tmp.cleanup());

/** A source over a fresh copy of the fixture, with stat calls counted; `watchDir` replaces fs.watch. */
function source(name: string, watchDir: (dir: string, cb: (event: string, filename: string | null) => void) => FSWatcher, pollMs: number) {
  const path = join(tmp.dir, name, "xds.yaml");
  writeText(path, fixtureYaml());
  /** Paths stat was called for, and those whose stat has returned (the poll has taken it in by the next timer). */
  const stats: string[] = [];
  const statted: string[] = [];
  const logs = memoryLogger("all:debug");
  const src = new XdsFileSource({
    path,
    displayPath: name,
    convert: inProcessConverter(),
    log: logs.log,
    debounceMs: 20,
    pollMs,
    fs: {
      watch: watchDir,
      stat: async (p) => {
        stats.push(p);
        const st = await stat(p);
        statted.push(p);
        return st;
      },
    },
  });
  const stop = new AbortController();
  stops.push(stop);
  /** Resolves with the snapshot version of the next update after the call. */
  const nextUpdate = () => new Promise<string>((r) => src.onUpdate((s) => r(s.version)));
  return { path, src, stats, statted, logs, stop, nextUpdate };
}

function mkdir(name: string) {
  mkdirSync(join(tmp.dir, name), { recursive: true });
}

test("a watchable directory: a change is picked up by inotify and the file is never stat-polled", async () => {
  mkdir("inotify");
  const s = source("inotify", (dir, cb) => watch(dir, cb), 5);
  await s.src.reload();
  s.src.watch(s.stop.signal);
  const updated = s.nextUpdate();
  writeText(s.path, fixtureYaml({ bTimeout: "7s" }));
  // The sentinel: the reload that inotify caused (>= 20 ms debounce, i.e. several 5 ms poll periods).
  await updated;
  expect(s.stats).toEqual([]);
});

test("the directory cannot be watched: the file is polled, a change is picked up and a warning names the file", async () => {
  mkdir("nowatch");
  const s = source(
    "nowatch",
    () => {
      throw Object.assign(new Error("inotify limit reached"), { code: "ENOSPC" });
    },
    10,
  );
  await s.src.reload();
  s.src.watch(s.stop.signal);
  expect(s.logs.lines.some((l) => l.includes("cannot watch nowatch: inotify limit reached (ENOSPC); polling it every 10 ms"))).toBe(true);
  // The poll needs one stat of the file as it was before it can see a change.
  while (s.statted.length === 0) await Bun.sleep(5);
  const updated = s.nextUpdate();
  writeText(s.path, fixtureYaml({ bTimeout: "9s" }));
  await updated;
  expect(s.stats.length).toBeGreaterThan(1);
  expect(s.stats.every((p) => p === s.path)).toBe(true);
});

test("a watcher that fails later: polling starts then, with a warning naming the file", async () => {
  mkdir("failing");
  const emitter = new EventEmitter();
  const fake = Object.assign(emitter, { close() {}, ref() {}, unref() {} }) as unknown as FSWatcher;
  const s = source("failing", () => fake, 10);
  await s.src.reload();
  s.src.watch(s.stop.signal);
  expect(s.stats).toEqual([]);
  emitter.emit("error", new Error("watch went away"));
  expect(s.logs.lines.some((l) => l.includes("watching failing failed: watch went away; polling it every 10 ms"))).toBe(true);
  while (s.statted.length === 0) await Bun.sleep(5);
  const updated = s.nextUpdate();
  writeText(s.path, fixtureYaml({ bTimeout: "11s" }));
  await updated;
  expect(s.stats.every((p) => p === s.path)).toBe(true);
});
