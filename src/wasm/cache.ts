// The local Wasm module cache (Istio's pkg/wasm/cache.go): modules are files
// <dir>/<sha256(module name)>/<sha256 of the binary>.wasm, where the module name is the URL
// without an OCI tag or digest. Lookups go by (name, checksum); a URL without a checksum finds its
// last known checksum, honouring the pull policy and the WasmPlugin's resource version as Istio
// does. Entries untouched for WASM_MODULE_EXPIRY are removed by purge() (run every
// WASM_PURGE_INTERVAL) — except a module some resource's latest config points Envoy at, which is
// never deleted under it. Concurrent requests for the same module share one download.
//
// Downloads run in at most `maxConcurrentDownloads` slots (slots.ts) and write to scratch files in
// the cache directory (spool.ts), never holding a module in memory; a download's scratch files are
// removed when it ends, however it ends, and purge() (and the first use of the cache) sweeps temp
// files a crashed run left. A file-system failure names the file and what to do.

import { createHash } from "node:crypto";
import { mkdir, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../lib/log.ts";
import type { Clock } from "./clock.ts";
import type { GcMeter } from "./gcmeter.ts";
import type { HttpFetcher } from "./http-fetcher.ts";
import type { FetchResult, WasmMetrics } from "./metrics.ts";
import type { OciFetcher } from "./oci.ts";
import { parseImageReference } from "./oci-reference.ts";
import { redactUrl } from "./redact.ts";
import { DownloadSlots } from "./slots.ts";
import { Scratch, TMP_MARKER, diskError, readHead, sha256File } from "./spool.ts";
import type { GetOptions, ModuleSource, PullPolicy } from "./types.ts";
import { isValidWasmBinary } from "./unbox.ts";
import { errorMessage } from "../lib/errors.ts";
import { ids } from "../lib/log.ts";

export class WasmCacheError extends Error {
  override name = "WasmCacheError";
}

export interface CacheOptions {
  dir: string;
  moduleExpiryMs: number;
  /** WASM_INSECURE_REGISTRIES: hosts (host[:port]) whose TLS is not verified; "*" = all. */
  insecureRegistries: ReadonlySet<string>;
  /** Downloads running at once; the others wait for a slot within their own deadline. */
  maxConcurrentDownloads: number;
}

export interface CacheDeps {
  http: Pick<HttpFetcher, "fetch">;
  oci: Pick<OciFetcher, "prepareFetch">;
  metrics: WasmMetrics;
  log: Logger;
  clock: Clock;
  /** Asks for a garbage collection every so many bytes streamed (gcmeter.ts). */
  meter?: GcMeter;
}

interface Entry {
  modulePath: string;
  last: number;
  referencingUrls: Set<string>;
}

interface ChecksumEntry {
  checksum: string;
  resourceVersionByResource: Map<string, string>;
}

interface Key {
  name: string;
  checksum: string;
  url: string;
  resourceName: string;
  resourceVersion: string;
}

const OCI_PREFIX = "oci://";

function moduleKey(name: string, checksum: string): string {
  return `${name}\0${checksum}`;
}

/** The module's identity without tag or digest (moduleNameFromURL). */
export function moduleNameFromUrl(url: string): string {
  if (url.startsWith(OCI_PREFIX)) {
    const ref = parseImageReference(url.slice(OCI_PREFIX.length));
    if (ref) return OCI_PREFIX + ref.repositoryName;
  }
  return url;
}

/** cache.go shouldIgnoreResourceVersion: default is IfNotPresent except oci `:latest`. */
export function shouldIgnoreResourceVersion(policy: PullPolicy, u: URL): boolean {
  if (policy === "Always") return false;
  if (policy === "IfNotPresent") return true;
  return u.protocol !== "oci:" || !u.pathname.endsWith(":latest");
}

export class ModuleCache implements ModuleSource {
  private readonly modules = new Map<string, Entry>();
  private readonly checksums = new Map<string, ChecksumEntry>();
  private readonly inflight = new Map<string, Promise<Entry>>();
  /** resource name -> the module file its latest converted config uses. */
  private readonly inUse = new Map<string, string>();
  private readonly slots: DownloadSlots;
  private readonly scratches = new Set<Scratch>();
  private downloads = 0;
  private swept: Promise<void> | undefined;

  constructor(
    private readonly o: CacheOptions,
    private readonly d: CacheDeps,
  ) {
    this.slots = new DownloadSlots(Math.max(1, o.maxConcurrentDownloads));
  }

  get size(): number {
    return this.modules.size;
  }

  /** Read-only view for the operator: each cached module, the URLs using it and when it was last used (cache clock). */
  snapshot(): { key: string; modulePath: string; urls: string[]; lastUsed: number }[] {
    return [...this.modules].map(([key, e]) => ({ key, modulePath: e.modulePath, urls: [...e.referencingUrls], lastUsed: e.last }));
  }

  async get(url: string, opts: GetOptions): Promise<string> {
    const key: Key = { name: moduleNameFromUrl(url), checksum: opts.checksum, url, resourceName: opts.resourceName, resourceVersion: opts.resourceVersion };
    const e = await this.getOrFetch(key, opts);
    if (opts.resourceName) this.inUse.set(opts.resourceName, e.modulePath);
    return e.modulePath;
  }

  private allowInsecure(host: string): boolean {
    return this.o.insecureRegistries.has("*") || this.o.insecureRegistries.has(host);
  }

  private async getOrFetch(key: Key, opts: GetOptions): Promise<Entry> {
    let u: URL;
    try {
      u = new URL(key.url);
    } catch {
      throw new WasmCacheError(`fail to parse Wasm module fetch url: ${redactUrl(key.url)}`);
    }
    const found = this.getEntry(key, shouldIgnoreResourceVersion(opts.pullPolicy, u));
    if (found.entry) return found.entry;
    key.checksum = found.checksum;
    const flightKey = `${key.url}\0${key.checksum}\0${opts.pullPolicy}`;
    const running = this.inflight.get(flightKey);
    if (running) {
      const e = await running;
      this.updateChecksum({ ...key, checksum: checksumOfPath(e.modulePath) });
      return e;
    }
    const p = this.download(key, opts, u);
    this.inflight.set(flightKey, p);
    try {
      return await p;
    } finally {
      this.inflight.delete(flightKey);
    }
  }

  private failed(result: FetchResult, message: string): never {
    this.d.metrics.remoteFetches.inc({ result });
    throw new WasmCacheError(message);
  }

  /** One download in a slot, with its own scratch files, removed at the end whatever happens. */
  private async download(key: Key, opts: GetOptions, u: URL): Promise<Entry> {
    const signal = AbortSignal.timeout(Math.max(1, opts.requestTimeoutMs));
    this.swept ??= this.sweep();
    await this.swept;
    return this.slots.run(signal, async () => {
      const scratch = new Scratch(this.o.dir, `download-${++this.downloads}`, this.d.meter);
      this.scratches.add(scratch);
      try {
        return await this.fetch(key, opts, u, signal, scratch);
      } finally {
        await scratch.cleanup();
        this.scratches.delete(scratch);
      }
    });
  }

  private async fetch(key: Key, opts: GetOptions, u: URL, signal: AbortSignal, scratch: Scratch): Promise<Entry> {
    const insecure = this.allowInsecure(u.host);
    const shown = redactUrl(key.url);
    let path: string | undefined;
    let fetchBinary: ((s: Scratch) => Promise<string>) | undefined;
    let digest: string;
    try {
      await mkdir(this.o.dir, { recursive: true, mode: 0o755 });
    } catch (e) {
      this.failed("download_failure", diskError(this.o.dir, e).message);
    }
    switch (u.protocol) {
      case "http:":
      case "https:":
        try {
          path = await this.d.http.fetch(key.url, insecure, signal, scratch);
          digest = scratch.digestOf(path) ?? (await sha256File(path));
        } catch (e) {
          this.failed("download_failure", errorMessage(e));
        }
        break;
      case "oci:":
        try {
          const prepared = await this.d.oci.prepareFetch(key.url.slice(OCI_PREFIX.length), { insecure, pullSecret: opts.pullSecret, signal });
          digest = prepared.digest;
          fetchBinary = prepared.fetchBinary;
        } catch (e) {
          this.failed("manifest_failure", `could not fetch Wasm OCI image: ${errorMessage(e)}`);
        }
        break;
      default:
        throw new WasmCacheError(`unsupported Wasm module downloading URL scheme: ${u.protocol.replace(/:$/, "")}`);
    }
    if (key.checksum === "") {
      key.checksum = digest!;
      const again = this.getEntry(key, true);
      if (again.entry) return again.entry;
    } else if (digest! !== key.checksum) {
      this.failed("checksum_mismatched", `module downloaded from ${shown} has checksum ${digest!}, which does not match: ${key.checksum}`);
    }
    if (fetchBinary) {
      try {
        path = await fetchBinary(scratch);
      } catch (e) {
        this.failed("download_failure", `could not fetch Wasm binary: ${errorMessage(e)}`);
      }
    }
    if (!isValidWasmBinary(await readHead(path!, 8))) this.failed("fetch_failure", `fetched Wasm binary from ${shown} is invalid`);
    key.checksum = digest!;
    let e: Entry;
    try {
      e = await this.addEntry(key, path!, scratch);
    } catch (err) {
      this.failed("download_failure", `could not store Wasm module ${shown}: ${errorMessage(err)}`);
    }
    // Counted once the module is in the cache, as Istio does.
    this.d.metrics.remoteFetches.inc({ result: "success" });
    return e;
  }

  /** cache.go updateChecksum: remember the checksum of tagged OCI and http(s) URLs. */
  private updateChecksum(key: Key): boolean {
    const need = !key.url.startsWith(OCI_PREFIX) || !key.url.includes("@");
    if (need) {
      let ce = this.checksums.get(key.url);
      if (!ce) {
        ce = { checksum: "", resourceVersionByResource: new Map() };
        this.checksums.set(key.url, ce);
      }
      ce.checksum = key.checksum;
      ce.resourceVersionByResource.set(key.resourceName, key.resourceVersion);
    }
    return need;
  }

  private async addEntry(key: Key, file: string, scratch: Scratch): Promise<Entry> {
    const mk = moduleKey(key.name, key.checksum);
    const existing = this.modules.get(mk);
    const need = this.updateChecksum(key);
    if (existing) {
      existing.last = this.d.clock.now();
      if (need) existing.referencingUrls.add(key.url);
      return existing;
    }
    const dir = join(this.o.dir, sha256Hex(new TextEncoder().encode(key.name)));
    const modulePath = join(dir, `${key.checksum}.wasm`);
    // Written in full as a scratch file beside, then renamed: Envoy never sees half a module.
    try {
      await mkdir(dir, { recursive: true, mode: 0o755 });
    } catch (e) {
      throw diskError(dir, e);
    }
    try {
      await rename(file, modulePath);
    } catch (e) {
      throw diskError(modulePath, e);
    }
    scratch.release(file);
    const raced = this.modules.get(mk);
    if (raced) return raced;
    const e: Entry = { modulePath, last: this.d.clock.now(), referencingUrls: new Set(need ? [key.url] : []) };
    this.modules.set(mk, e);
    this.d.metrics.cacheEntries.set(this.modules.size);
    return e;
  }

  /** cache.go getEntry: the cached entry for the key, and the checksum the key resolved to. */
  private getEntry(key: Key, ignoreResourceVersion: boolean): { entry?: Entry; checksum: string } {
    let checksum = key.checksum;
    let hit = false;
    try {
      if (checksum === "" && key.url.startsWith(OCI_PREFIX)) {
        const ref = parseImageReference(key.url.slice(OCI_PREFIX.length));
        if (ref?.digest?.startsWith("sha256:")) checksum = ref.digest.slice("sha256:".length);
      }
      if (checksum === "") {
        const ce = this.checksums.get(key.url);
        if (ce) {
          if (ignoreResourceVersion || key.resourceVersion === ce.resourceVersionByResource.get(key.resourceName)) checksum = ce.checksum;
          ce.resourceVersionByResource.set(key.resourceName, key.resourceVersion);
        }
      }
      const e = this.modules.get(moduleKey(key.name, checksum));
      if (e) {
        e.last = this.d.clock.now();
        hit = true;
        this.updateChecksum({ ...key, checksum });
        return { entry: e, checksum };
      }
      return { checksum };
    } finally {
      this.d.metrics.cacheLookups.inc({ hit: String(hit) });
    }
  }

  /**
   * Remove temp files (`*.wasm.tmp-*`) no running download owns: what a failed write or a crash
   * left in the directory or a module's subdirectory. Failures are logged, never thrown.
   */
  async sweep(): Promise<void> {
    const owned = (p: string) => [...this.scratches].some((s) => s.owns(p));
    const visit = async (dir: string, depth: number): Promise<void> => {
      let names: import("node:fs").Dirent[];
      try {
        names = await readdir(dir, { withFileTypes: true });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") this.d.log.warn(`cannot list the Wasm cache directory ${dir}: ${errorMessage(e)}`);
        return;
      }
      for (const d of names) {
        const p = join(dir, d.name);
        if (d.isDirectory() && depth === 0) await visit(p, 1);
        else if (d.isFile() && d.name.includes(TMP_MARKER) && !owned(p)) {
          await rm(p, { force: true }).then(
            () => this.d.log.debug(`removed leftover Wasm temp file ${p}`, ids({ path: p })),
            (e: unknown) => this.d.log.warn(`cannot remove leftover Wasm temp file ${p}: ${errorMessage(e)}`, ids({ path: p })),
          );
        }
      }
    };
    await visit(this.o.dir, 0);
  }

  /** Remove modules not touched for the expiry, keeping any module a resource's latest config uses; then sweep temp files. */
  async purge(): Promise<void> {
    await this.sweep();
    const now = this.d.clock.now();
    const used = new Set(this.inUse.values());
    for (const [k, m] of [...this.modules]) {
      if (now - m.last <= this.o.moduleExpiryMs) continue;
      if (used.has(m.modulePath)) continue;
      try {
        await rm(m.modulePath);
      } catch (e) {
        this.d.log.error(`failed to purge Wasm module ${m.modulePath}: ${errorMessage(e)}`, ids({ path: m.modulePath }));
        continue;
      }
      for (const url of m.referencingUrls) this.checksums.delete(url);
      this.modules.delete(k);
      this.d.log.debug(`successfully removed stale Wasm module ${m.modulePath}`, ids({ path: m.modulePath }));
    }
    this.d.metrics.cacheEntries.set(this.modules.size);
  }
}

export function sha256Hex(b: Uint8Array): string {
  return createHash("sha256").update(b).digest("hex");
}

function checksumOfPath(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1).replace(/\.wasm$/, "");
}
