// The gRPC (proxyless) bootstrap readiness check, as Istio's grpcready probe: the file at
// GRPC_XDS_BOOTSTRAP must load as a bootstrap; if it declares a `file_watcher` certificate
// provider, the three files it names must exist. A bootstrap that loaded once is kept; the
// certificate files are checked on every call (they appear once the first certificate is written).

import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { errorMessage } from "../lib/errors.ts";
import { FILE_LIMITS, readBoundedTextSync } from "../lib/boundedfile.ts";

interface FileWatcherConfig {
  certificate_file?: string;
  private_key_file?: string;
  ca_certificate_file?: string;
}

interface LoadedBootstrap {
  watchedFiles: string[];
}

export interface FileAccess {
  readFile(path: string): string;
  exists(path: string): boolean;
}

const realFiles: FileAccess = {
  readFile: (p) => readBoundedTextSync(p, FILE_LIMITS.config),
  exists: (p) => existsSync(p),
};

/** Parse a gRPC xDS bootstrap; returns the file_watcher provider's files. Throws with the reason. */
export function parseGrpcBootstrap(text: string): LoadedBootstrap {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new Error(`not valid JSON: ${errorMessage(e)}`, { cause: e });
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) throw new Error("not a JSON object");
  const servers = (doc as { xds_servers?: unknown }).xds_servers;
  if (!Array.isArray(servers) || servers.length === 0) throw new Error("no xds_servers");
  const providers = (doc as { certificate_providers?: Record<string, { plugin_name?: string; config?: FileWatcherConfig }> }).certificate_providers ?? {};
  const watchedFiles: string[] = [];
  for (const p of Object.values(providers)) {
    if (p?.plugin_name !== "file_watcher") continue;
    const c = p.config ?? {};
    for (const f of [c.certificate_file, c.private_key_file, c.ca_certificate_file]) if (f) watchedFiles.push(f);
    break;
  }
  return { watchedFiles };
}

export class GrpcBootstrapProbe {
  private loaded?: LoadedBootstrap;

  constructor(
    private readonly path: string,
    private readonly root: string = process.cwd(),
    private readonly files: FileAccess = realFiles,
  ) {}

  private abs(p: string): string {
    return isAbsolute(p) ? p : resolve(this.root, p);
  }

  /** The files a passing check depends on (absolute), once the bootstrap has loaded. */
  watchedFiles(): string[] {
    return (this.loaded?.watchedFiles ?? []).map((f) => this.abs(f));
  }

  /** undefined when ready, else what is missing. */
  check(): string | undefined {
    if (!this.loaded) {
      try {
        this.loaded = parseGrpcBootstrap(this.files.readFile(this.abs(this.path)));
      } catch (e) {
        return `failed loading ${this.path}: ${errorMessage(e)}`;
      }
    }
    for (const f of this.loaded.watchedFiles) {
      if (!this.files.exists(this.abs(f))) return `${f} does not exist`;
    }
    return undefined;
  }
}
