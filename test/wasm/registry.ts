// A real OCI registry for the Wasm suites: Debian's docker-registry (distribution 2.8) on
// loopback, started per suite with its own storage directory and optional htpasswd auth or TLS,
// and a small pusher speaking the registry HTTP API (blob upload, manifest put).

import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs } from "../../bench/support.ts";
import { parseProcStat } from "../../src/envoy/reaper.ts";
import { freePort } from "../support/ports.ts";

export interface RegistryOptions {
  /** htpasswd user and password (Basic auth); the realm is a URL so Istio's realm check passes. */
  auth?: { user: string; password: string };
  tls?: { cert: string; key: string };
}

/** How long a registry that never answers is waited for (the hook's timeout is 30 s). */
const REGISTRY_START_BUDGET_MS = 25_000;

/** A process's state and CPU time from /proc/PID/stat: a registry with no CPU time never ran. */
function processCpu(pid: number): string {
  try {
    const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
    return `state ${stat?.state ?? "unknown"}, ${cpuMs(pid)} ms of CPU`;
  } catch (e) {
    return `its /proc entry unreadable: ${e instanceof Error ? e.message : e}`;
  }
}

const digestOf = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

export class TestRegistry {
  private proc: ChildProcess | undefined;
  private dir = "";
  host = "";
  private log = "";

  constructor(private readonly o: RegistryOptions = {}) {}

  async start(): Promise<this> {
    this.dir = mkdtempSync(join(tmpdir(), "wasm-registry-"));
    const port = await freePort();
    this.host = `127.0.0.1:${port}`;
    const lines = [
      "version: 0.1",
      "log:",
      "  level: warn",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${join(this.dir, "data")}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: ${this.host}`,
    ];
    if (this.o.tls) lines.push("  tls:", `    certificate: ${this.o.tls.cert}`, `    key: ${this.o.tls.key}`);
    if (this.o.auth) {
      const hash = await Bun.password.hash(this.o.auth.password, { algorithm: "bcrypt", cost: 4 });
      writeFileSync(join(this.dir, "htpasswd"), `${this.o.auth.user}:${hash}\n`);
      lines.push("auth:", "  htpasswd:", "    realm: https://registry.test/", `    path: ${join(this.dir, "htpasswd")}`);
    }
    mkdirSync(join(this.dir, "data"));
    writeFileSync(join(this.dir, "config.yml"), `${lines.join("\n")}\n`);
    this.proc = spawn("docker-registry", ["serve", join(this.dir, "config.yml")], { stdio: ["ignore", "ignore", "pipe"] });
    this.proc.stderr!.on("data", (b: Buffer) => (this.log += b.toString()));
    // The wait ends at the first answer. Its budget (inside the hook's 30 s) only bounds how long a
    // registry that never answers is waited for; the error then says what was seen, and how much
    // CPU the registry itself had, so a machine that stalled is told apart from a registry that failed.
    const began = Date.now();
    let attempts = 0;
    let last = "no attempt";
    for (;;) {
      attempts++;
      try {
        const r = await fetch(`${this.base}/v2/`, { tls: { rejectUnauthorized: false } } as RequestInit);
        if (r.status === 200 || r.status === 401) break;
        last = `HTTP ${r.status}`;
      } catch (e) {
        last = e instanceof Error ? e.message : String(e); // not listening yet
      }
      if (Date.now() - began > REGISTRY_START_BUDGET_MS || this.proc.exitCode !== null) throw new Error(this.startFailure(began, attempts, last));
      await Bun.sleep(50);
    }
    return this;
  }

  private startFailure(began: number, attempts: number, last: string): string {
    const proc = this.proc!;
    const state = proc.exitCode !== null ? `has exited with ${proc.exitCode}` : `is alive (${processCpu(proc.pid!)})`;
    return [
      `docker-registry at ${this.host} did not come up after ${Date.now() - began} ms and ${attempts} attempts`,
      `last attempt: ${last}; the registry ${state}`,
      `its log: ${this.log || "(nothing yet: it logs a warning about http.secret once configured)"}`,
    ].join("\n");
  }

  get base(): string {
    return `${this.o.tls ? "https" : "http"}://${this.host}`;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.o.auth) h.authorization = `Basic ${Buffer.from(`${this.o.auth.user}:${this.o.auth.password}`).toString("base64")}`;
    return h;
  }

  async pushBlob(repo: string, data: Uint8Array): Promise<string> {
    const digest = digestOf(data);
    const init = { tls: { rejectUnauthorized: false } } as RequestInit;
    const start = await fetch(`${this.base}/v2/${repo}/blobs/uploads/`, { ...init, method: "POST", headers: this.headers() });
    if (start.status !== 202) throw new Error(`blob upload start: ${start.status} ${await start.text()}`);
    const loc = new URL(start.headers.get("location")!, this.base);
    loc.searchParams.set("digest", digest);
    const put = await fetch(loc.href, { ...init, method: "PUT", body: data, headers: this.headers({ "content-type": "application/octet-stream" }) });
    if (put.status !== 201) throw new Error(`blob upload: ${put.status} ${await put.text()}`);
    return digest;
  }

  /** Put a manifest; returns its digest (hex, as Istio's cache names the module file). */
  async pushManifest(repo: string, tag: string, manifest: object, mediaType: string): Promise<string> {
    const body = new TextEncoder().encode(JSON.stringify(manifest));
    const r = await fetch(`${this.base}/v2/${repo}/manifests/${tag}`, {
      tls: { rejectUnauthorized: false },
      method: "PUT",
      body,
      headers: this.headers({ "content-type": mediaType }),
    } as RequestInit);
    if (r.status !== 201) throw new Error(`manifest put: ${r.status} ${await r.text()}`);
    return digestOf(body).slice("sha256:".length);
  }

  async stop(): Promise<void> {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((r) => this.proc!.once("exit", r));
      this.proc.kill("SIGTERM");
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export const MT = {
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  ociConfig: "application/vnd.oci.image.config.v1+json",
  ociLayer: "application/vnd.oci.image.layer.v1.tar+gzip",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerConfig: "application/vnd.docker.container.image.v1+json",
  dockerLayer: "application/vnd.docker.image.rootfs.diff.tar.gzip",
  wasmLayer: "application/vnd.module.wasm.content.layer.v1+wasm",
  wasmConfig: "application/vnd.module.wasm.config.v1+json",
};

/** Push `module` as a compat image (one tar+gzip layer holding plugin.wasm), OCI or Docker media types. */
export async function pushImage(reg: TestRegistry, repo: string, tag: string, tgz: Uint8Array, docker: boolean): Promise<string> {
  const config = new TextEncoder().encode(JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: [] } }));
  const cfgDigest = await reg.pushBlob(repo, config);
  const layerDigest = await reg.pushBlob(repo, tgz);
  const mt = docker ? MT.dockerManifest : MT.ociManifest;
  return reg.pushManifest(
    repo,
    tag,
    {
      schemaVersion: 2,
      mediaType: mt,
      config: { mediaType: docker ? MT.dockerConfig : MT.ociConfig, digest: cfgDigest, size: config.length },
      layers: [{ mediaType: docker ? MT.dockerLayer : MT.ociLayer, digest: layerDigest, size: tgz.length }],
    },
    mt,
  );
}

/** Push `module` as Solo's Wasm artifact: two layers, a runtime config and the raw binary. */
export async function pushArtifact(reg: TestRegistry, repo: string, tag: string, module: Uint8Array): Promise<string> {
  const config = new TextEncoder().encode("{}");
  const runtime = new TextEncoder().encode(JSON.stringify({ type: "envoy_proxy", abiVersions: ["v0-097b7f2e4cc1fb490cc1943d0d633655ac3c522f"] }));
  const cfgDigest = await reg.pushBlob(repo, config);
  const runtimeDigest = await reg.pushBlob(repo, runtime);
  const modDigest = await reg.pushBlob(repo, module);
  return reg.pushManifest(
    repo,
    tag,
    {
      schemaVersion: 2,
      mediaType: MT.ociManifest,
      config: { mediaType: "application/vnd.module.wasm.config.v1+json", digest: cfgDigest, size: config.length },
      layers: [
        { mediaType: MT.wasmConfig, digest: runtimeDigest, size: runtime.length },
        { mediaType: MT.wasmLayer, digest: modDigest, size: module.length },
      ],
    },
    MT.ociManifest,
  );
}
