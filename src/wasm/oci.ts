// Pulls a Wasm module from an OCI registry (Istio's pkg/wasm/imagefetcher.go, on the registry
// HTTP API v2): the manifest first — its digest is the module's checksum, so a cached module is
// found without downloading layers — then, only if needed, the layer with the binary, in one of
// the layouts Istio reads: the compat image (last layer a Docker or OCI tar+gzip holding
// plugin.wasm) or Solo's Wasm artifact (two layers, one
// application/vnd.module.wasm.content.layer.v1+wasm). HTTPS first; plain HTTP only when the
// registry answers in plain HTTP AND is insecure (WASM_INSECURE_REGISTRIES, which also skips
// certificate checks), localhost, or a loopback or private-range IP literal (as
// go-containerregistry's Registry.Scheme): a public name never downgrades. Anonymous, Basic and
// Bearer-token auth; every host dialled goes through the AddressGuard. A layer is streamed to a
// scratch file, held to its descriptor's size and digest; manifests are checked for shape before
// use, so a malformed one is reported as what it is.

import { createHash } from "node:crypto";
import { isIP } from "node:net";
import type { Logger } from "../lib/log.ts";
import { WasmFetchError, guardedGet, readCapped } from "./http-fetcher.ts";
import { parseImageReference, type ImageReference } from "./oci-reference.ts";
import { RegistryAuthError, credentialsFor, parseChallenge, validateAllRealms, type Credentials } from "./registry-auth.ts";
import { bodyChunks, spool, type ByteLimit, type Scratch } from "./spool.ts";
import { rangeList, type AddressGuard } from "./ssrf.ts";
import { copyRange, gunzipFile, tarEntries } from "./unbox.ts";
import { errorMessage } from "../lib/errors.ts";

export const MEDIA = {
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  ociIndex: "application/vnd.oci.image.index.v1+json",
  dockerLayer: "application/vnd.docker.image.rootfs.diff.tar.gzip",
  ociLayer: "application/vnd.oci.image.layer.v1.tar+gzip",
  wasmArtifactLayer: "application/vnd.module.wasm.content.layer.v1+wasm",
} as const;

const ACCEPT = [MEDIA.ociManifest, MEDIA.dockerManifest, MEDIA.ociIndex, MEDIA.dockerList].join(", ");
const MANIFEST_LIMIT: ByteLimit = { max: 4 << 20, why: "the agent's fixed limit for image manifests" };
const TOKEN_LIMIT: ByteLimit = { max: 1 << 20, why: "the agent's fixed limit for registry token responses" };
const PLUGIN_FILE = "plugin.wasm";

export interface PrepareOptions {
  insecure: boolean;
  pullSecret?: Uint8Array;
  signal: AbortSignal;
}

export interface PreparedFetch {
  /** Hex sha256 of the image manifest. */
  digest: string;
  /** Download the module into a scratch file; its path. */
  fetchBinary(scratch: Scratch): Promise<string>;
}

interface Descriptor {
  mediaType?: string;
  digest?: string;
  size?: number;
  platform?: { os?: string; architecture?: string };
}

interface Manifest {
  mediaType?: string;
  layers?: Descriptor[];
  manifests?: Descriptor[];
}

export class OciError extends Error {
  override name = "OciError";
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function descriptor(v: unknown, where: string): Descriptor {
  if (!isObject(v)) throw new OciError(`${where} is not an object`);
  for (const k of ["mediaType", "digest"] as const) if (v[k] !== undefined && typeof v[k] !== "string") throw new OciError(`${where}.${k} is not a string`);
  if (v.size !== undefined && !(Number.isSafeInteger(v.size) && (v.size as number) >= 0)) throw new OciError(`${where}.size is not a byte count`);
  if (v.platform !== undefined && !isObject(v.platform)) throw new OciError(`${where}.platform is not an object`);
  return v as Descriptor;
}

/** The manifest or index JSON, checked for the shape this code reads; errors name the bad field. */
export function parseManifest(text: string): Manifest {
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch (e) {
    throw new OciError(`not JSON: ${errorMessage(e)}`, { cause: e });
  }
  if (!isObject(m)) throw new OciError("not a JSON object");
  if (m.mediaType !== undefined && typeof m.mediaType !== "string") throw new OciError("mediaType is not a string");
  for (const k of ["layers", "manifests"] as const) {
    if (m[k] === undefined || m[k] === null) continue;
    if (!Array.isArray(m[k])) throw new OciError(`${k} is not a list`);
    (m[k] as unknown[]).forEach((d, i) => descriptor(d, `${k}[${i}]`));
  }
  return m as Manifest;
}

const PLAIN_HTTP_RANGES = rangeList(["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "::1/128"]);

/**
 * go-containerregistry's Registry.Scheme (what Istio's fetcher uses): the registries that may be
 * spoken to in plain HTTP are the insecure ones, localhost, loopback and RFC 1918 IP literals.
 */
export function mayUsePlainHttp(registry: string, insecure: boolean): boolean {
  if (insecure) return true;
  const host = registry.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  if (host === "localhost") return true;
  const family = isIP(host);
  return family !== 0 && PLAIN_HTTP_RANGES.check(host, family === 4 ? "ipv4" : "ipv6");
}

/** The TLS handshake failed because the other side is not TLS (not a certificate problem). */
function speaksPlainHttp(e: Error): boolean {
  if (e instanceof OciError || e instanceof RegistryAuthError || e.name === "BlockedAddressError") return false;
  const code = (e as NodeJS.ErrnoException).code ?? "";
  return code === "EPROTO" || /speak TLS|wrong version number|HTTP response to HTTPS/i.test(e.message);
}

function sha256Hex(b: Uint8Array): string {
  return createHash("sha256").update(b).digest("hex");
}

/** One registry session: base URL (scheme decided on first contact), credentials, bearer token. */
class RegistrySession {
  private base: string | undefined;
  private authorization: string | undefined;

  constructor(
    private readonly ref: ImageReference,
    private readonly creds: Credentials,
    private readonly o: { guard: AddressGuard; insecure: boolean; signal: AbortSignal; log: Logger },
  ) {}

  async get(path: string, accept?: string): Promise<Response> {
    if (!this.base) return this.firstContact(path, accept);
    return this.getAuthed(`${this.base}${path}`, accept);
  }

  private async firstContact(path: string, accept?: string): Promise<Response> {
    const https = `https://${this.ref.registry}`;
    try {
      const r = await this.getAuthed(`${https}${path}`, accept);
      this.base = https;
      return r;
    } catch (e) {
      if (!speaksPlainHttp(e as Error) || this.o.signal.aborted) throw e;
      if (!mayUsePlainHttp(this.ref.registry, this.o.insecure))
        throw new OciError(
          `${this.ref.registry} does not speak TLS; plain HTTP is used only for registries listed in WASM_INSECURE_REGISTRIES, localhost, or loopback and RFC 1918 IP addresses (list it there if it is trusted)`,
          { cause: e },
        );
    }
    // go-containerregistry/Istio: an insecure, loopback or private registry that answers TLS with plain HTTP is spoken to in plain HTTP.
    this.base = `http://${this.ref.registry}`;
    this.o.log.info(`fetching image with plain text from ${this.ref.registry}/${this.ref.repository}`);
    return this.getAuthed(`${this.base}${path}`, accept);
  }

  private async getAuthed(url: string, accept?: string): Promise<Response> {
    const headers: Record<string, string> = {};
    if (accept) headers.accept = accept;
    if (this.authorization) headers.authorization = this.authorization;
    let res = await guardedGet(url, { guard: this.o.guard, insecure: this.o.insecure, signal: this.o.signal, headers });
    if (res.status !== 401) return res;
    const challenges = res.headers.get("www-authenticate") ?? "";
    await res.body?.cancel().catch(() => {});
    try {
      validateAllRealms(challenges);
    } catch (e) {
      throw new RegistryAuthError(`rejected unsafe bearer realm: ${errorMessage(e)}`, { cause: e });
    }
    if (this.authorization) throw new OciError(`${this.ref.registry} refused the credentials (401 Unauthorized)`);
    this.authorization = await this.authorize(challenges);
    headers.authorization = this.authorization;
    res = await guardedGet(url, { guard: this.o.guard, insecure: this.o.insecure, signal: this.o.signal, headers });
    if (res.status === 401) {
      await res.body?.cancel().catch(() => {});
      throw new OciError(`${this.ref.registry} refused the credentials (401 Unauthorized)`);
    }
    return res;
  }

  private basic(): string | undefined {
    if (this.creds.kind !== "basic") return undefined;
    return `Basic ${Buffer.from(`${this.creds.username}:${this.creds.password}`).toString("base64")}`;
  }

  private async authorize(wwwAuth: string): Promise<string> {
    const ch = parseChallenge(wwwAuth);
    if (ch.scheme === "basic") {
      const b = this.basic();
      if (!b) throw new OciError(`${this.ref.registry} wants credentials (Basic) and the pull secret has none for it`);
      return b;
    }
    if (ch.scheme !== "bearer" || !ch.params.realm) throw new OciError(`unsupported registry auth challenge ${JSON.stringify(wwwAuth)}`);
    if (this.creds.kind === "token" && this.creds.registryToken) return `Bearer ${this.creds.registryToken}`;
    const u = new URL(ch.params.realm);
    if (ch.params.service) u.searchParams.set("service", ch.params.service);
    u.searchParams.set("scope", ch.params.scope ?? `repository:${this.ref.repository}:pull`);
    const headers: Record<string, string> = {};
    const b = this.basic();
    if (b) headers.authorization = b;
    const res = await guardedGet(u.href, { guard: this.o.guard, insecure: this.o.insecure, signal: this.o.signal, headers });
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      throw new OciError(`token endpoint ${u.origin}${u.pathname} answered ${res.status}`);
    }
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder().decode(await readCapped(res, TOKEN_LIMIT, "registry token response")));
    } catch (e) {
      if (!(e instanceof SyntaxError)) throw e;
      throw new OciError(`token endpoint ${u.origin}${u.pathname} answered something that is not JSON`, { cause: e });
    }
    const token = isObject(body) ? (body.token ?? body.access_token) : undefined;
    if (token !== undefined && typeof token !== "string") throw new OciError(`token endpoint ${u.origin}${u.pathname} returned a token that is not a string`);
    if (!token) throw new OciError(`token endpoint ${u.origin}${u.pathname} returned no token`);
    return `Bearer ${token}`;
  }
}

export class OciFetcher {
  constructor(private readonly o: { guard: AddressGuard; maxBytes: number; log: Logger }) {}

  async prepareFetch(refText: string, opts: PrepareOptions): Promise<PreparedFetch> {
    const ref = parseImageReference(refText);
    if (!ref) throw new OciError(`could not parse url in image reference: ${JSON.stringify(refText)}`);
    this.o.log.info(`fetching image ${ref.repository} from registry ${ref.registry} with tag ${ref.identifier}`);
    const creds = credentialsFor(opts.pullSecret, ref.registry);
    const s = new RegistrySession(ref, creds, { guard: this.o.guard, insecure: opts.insecure, signal: opts.signal, log: this.o.log });
    let { manifest, bytes } = await this.manifest(s, ref, ref.identifier);
    if (ref.digest && `sha256:${sha256Hex(bytes)}` !== ref.digest) throw new OciError(`manifest of ${refText} does not match its digest`);
    if (manifest.manifests) {
      const pick = manifest.manifests.find((m) => m.platform?.os === "linux" && m.platform?.architecture === "amd64");
      if (!pick?.digest) throw new OciError(`no linux/amd64 image in the index of ${refText}`);
      ({ manifest, bytes } = await this.manifest(s, ref, pick.digest));
      if (`sha256:${sha256Hex(bytes)}` !== pick.digest) throw new OciError(`manifest ${pick.digest} does not match its digest`);
    }
    const digest = sha256Hex(bytes);
    return { digest, fetchBinary: (scratch) => this.extract(s, ref, manifest, scratch) };
  }

  private async manifest(s: RegistrySession, ref: ImageReference, id: string): Promise<{ manifest: Manifest; bytes: Uint8Array }> {
    const res = await s.get(`/v2/${ref.repository}/manifests/${id}`, ACCEPT);
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      throw new OciError(`could not fetch manifest: ${ref.registry}/${ref.repository}:${id} answered ${res.status}`);
    }
    const bytes = await readCapped(res, MANIFEST_LIMIT, `image manifest ${ref.registry}/${ref.repository}:${id}`);
    let manifest: Manifest;
    try {
      manifest = parseManifest(new TextDecoder().decode(bytes));
    } catch (e) {
      throw new OciError(`image manifest ${ref.registry}/${ref.repository}:${id} is not a valid manifest: ${errorMessage(e)}`, { cause: e });
    }
    manifest.mediaType ??= res.headers.get("content-type")?.split(";")[0];
    return { manifest, bytes };
  }

  /** The layer streamed into a scratch file, exactly its declared size and digest; its path. */
  private async blob(s: RegistrySession, ref: ImageReference, d: Descriptor, scratch: Scratch): Promise<string> {
    if (!d.digest || !/^sha256:[a-f0-9]{64}$/.test(d.digest)) throw new OciError(`layer has no sha256 digest`);
    if (d.size === undefined) throw new OciError(`layer ${d.digest} declares no size`);
    if (d.size > this.o.maxBytes)
      throw new OciError(`layer ${d.digest} of ${d.size} bytes exceeds the limit of ${this.o.maxBytes} bytes (ISTIO_WASM_MAX_BINARY_SIZE_BYTES)`);
    const res = await s.get(`/v2/${ref.repository}/blobs/${d.digest}`);
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      throw new OciError(`could not get layer content: ${d.digest} answered ${res.status}`);
    }
    const path = scratch.file();
    const got = await spool(bodyChunks(res), path, { max: d.size, why: "the size its manifest declares" }, `layer ${d.digest}`, scratch);
    if (got.size !== d.size) throw new OciError(`layer ${d.digest} is ${got.size} bytes; its manifest declares ${d.size}`);
    if (`sha256:${got.sha256}` !== d.digest) throw new OciError(`layer ${d.digest} does not match its digest`);
    return path;
  }

  private async extract(s: RegistrySession, ref: ImageReference, m: Manifest, scratch: Scratch): Promise<string> {
    const layers = m.layers ?? [];
    if (m.mediaType === MEDIA.dockerManifest) {
      try {
        return await this.compat(s, ref, layers, MEDIA.dockerLayer, scratch);
      } catch (e) {
        throw new OciError(`could not extract Wasm file from the image as Docker container ${errorMessage(e)}`, { cause: e });
      }
    }
    let errCompat: Error;
    try {
      return await this.compat(s, ref, layers, MEDIA.ociLayer, scratch);
    } catch (e) {
      errCompat = e as Error;
    }
    let errOci: Error;
    try {
      return await this.artifact(s, ref, layers, scratch);
    } catch (e) {
      errOci = e as Error;
    }
    throw new OciError(
      `the given image is in invalid format as an OCI image: could not parse as compat variant: ${errCompat.message}; could not parse as oci variant: ${errOci.message}`,
    );
  }

  /** Compat variant: the last layer is a tar+gzip holding plugin.wasm. */
  private async compat(s: RegistrySession, ref: ImageReference, layers: Descriptor[], want: string, scratch: Scratch): Promise<string> {
    if (layers.length === 0) throw new OciError("number of layers must be greater than zero");
    const layer = layers[layers.length - 1]!;
    if (layer.mediaType !== want) throw new OciError(`invalid media type ${layer.mediaType} (expect ${want})`);
    return extractWasmPluginBinary(await this.blob(s, ref, layer, scratch), scratch, this.o.maxBytes);
  }

  /** Solo's Wasm artifact: exactly two layers, one of them the raw binary. */
  private async artifact(s: RegistrySession, ref: ImageReference, layers: Descriptor[], scratch: Scratch): Promise<string> {
    if (layers.length !== 2) throw new OciError(`number of layers must be 2 but got ${layers.length}`);
    const layer = layers.find((l) => l.mediaType === MEDIA.wasmArtifactLayer);
    if (!layer) throw new OciError(`could not find the layer of type ${MEDIA.wasmArtifactLayer}`);
    return this.blob(s, ref, layer, scratch);
  }
}

/** plugin.wasm from a tar.gz layer file (imagefetcher.go extractWasmPluginBinary), into a scratch file; its path. */
export async function extractWasmPluginBinary(tgz: string, scratch: Scratch, maxBytes: number): Promise<string> {
  const limit: ByteLimit = { max: maxBytes, why: "ISTIO_WASM_MAX_BINARY_SIZE_BYTES" };
  const tar = scratch.file();
  try {
    await gunzipFile(tgz, tar, limit, "image layer");
  } catch (e) {
    throw new OciError(`failed to parse layer as tar.gz: ${errorMessage(e)}`, { cause: e });
  }
  for await (const entry of tarEntries(tar, limit)) {
    if (entry.name.split("/").pop() !== PLUGIN_FILE) continue;
    const out = scratch.file();
    await copyRange(tar, entry.offset, entry.size, out, limit, `${PLUGIN_FILE} of the image layer`, scratch);
    return out;
  }
  throw new OciError(`${PLUGIN_FILE} not found in the archive`);
}

export { WasmFetchError };
