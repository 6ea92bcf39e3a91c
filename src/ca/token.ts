// Where the bearer token for the CA comes from. Istio's JWT credential fetcher: the projected
// service-account token file, re-read on every request (kubelet rotates it), trimmed; a missing or
// empty file means no authorization header. Never logged.

import { CaError } from "./errors.ts";
import { FILE_LIMITS, readBoundedText } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";

export interface TokenSource {
  /** Human description for error messages (the path, never the token). */
  readonly describe: string;
  token(): Promise<string | undefined>;
}

export const ISTIO_TOKEN_PATH = "./var/run/secrets/tokens/istio-token";

export class FileTokenSource implements TokenSource {
  constructor(readonly path: string) {}

  get describe(): string {
    return `token file ${this.path}`;
  }

  async token(): Promise<string | undefined> {
    try {
      const t = (await readBoundedText(this.path, { maxBytes: FILE_LIMITS.token })).trim();
      return t === "" ? undefined : t;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new CaError("token", `reading ${this.path}: ${errorMessage(e)}`, undefined, { cause: e });
    }
  }
}

/** CREDENTIAL_FETCHER_TYPE: JWT (default) reads the token file; others are not supported here. */
export function tokenSourceFor(fetcherType: string, path: string): TokenSource {
  const t = fetcherType.trim();
  if (t === "" || t === "JWT") return new FileTokenSource(path);
  throw new CaError("config", `CREDENTIAL_FETCHER_TYPE: "${fetcherType}" is not supported by this agent (want JWT)`);
}
