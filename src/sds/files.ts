// Reading certificate files for SDS: a key/chain pair validated together (the key must match the
// first certificate), or a root bundle (invalid certificates tolerated and reported, as Istio).
// Reads retry with backoff starting at FILE_DEBOUNCE_DURATION for up to 10s, since a mounted
// secret can be caught half-written.

import { certInfo, keyMatchesCert, pemBlocks, validCerts } from "../ca/pem.ts";
import { clockSleep, type Clock } from "../lib/clock.ts";
import { SdsError } from "./errors.ts";
import { contentVersion, type SecretItem } from "./item.ts";
import { FILE_LIMITS, FileLimitError, readBoundedText } from "../lib/boundedfile.ts";
import { errorMessage } from "../lib/errors.ts";

async function readText(path: string, what: string, resource: string, signal?: AbortSignal): Promise<string> {
  try {
    return await readBoundedText(path, { maxBytes: FILE_LIMITS.certificate, ...(signal ? { signal } : {}) });
  } catch (e) {
    if (e instanceof FileLimitError) throw new SdsError(`${resource}: reading ${what} ${e.message}`, resource);
    throw new SdsError(`${resource}: reading ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? errorMessage(e)}`, resource, { cause: e });
  }
}

/** Key/chain pair from files; throws SdsError naming the file and the problem. */
export async function readCertPair(resource: string, certPath: string, keyPath: string, now: number, signal?: AbortSignal): Promise<SecretItem> {
  const chain = await readText(certPath, "certificate chain", resource, signal);
  const key = await readText(keyPath, "private key", resource, signal);
  const certs = pemBlocks(chain, "CERTIFICATE");
  if (certs.length === 0) throw new SdsError(`${resource}: ${certPath} has no PEM certificate`, resource);
  if (pemBlocks(key).length === 0) throw new SdsError(`${resource}: ${keyPath} has no PEM private key`, resource);
  let info;
  try {
    info = certInfo(certs[0]!, certPath);
  } catch (e) {
    throw new SdsError(`${resource}: ${errorMessage(e)}`, resource, { cause: e });
  }
  if (!keyMatchesCert(key, certs[0]!)) throw new SdsError(`${resource}: private key ${keyPath} does not match the certificate in ${certPath}`, resource);
  return { resourceName: resource, certificateChain: chain, privateKey: key, createdMs: now, expireMs: info.notAfter, version: contentVersion(chain, key) };
}

/** Root bundle from a file; invalid certificates are dropped (count returned), none valid is an error. */
export async function readRootBundle(resource: string, path: string, signal?: AbortSignal): Promise<{ item: SecretItem; invalid: number }> {
  const text = await readText(path, "CA bundle", resource, signal);
  const { certs, invalid } = validCerts(text);
  if (certs.length === 0) throw new SdsError(`${resource}: ${path} has no valid PEM certificate`, resource);
  const rootCert = certs.join("");
  return { item: { resourceName: resource, rootCert, createdMs: 0, expireMs: 0, version: contentVersion(rootCert) }, invalid };
}

/** Retry `read` with backoff from `debounceMs`, doubling, for up to `totalMs`. */
export async function withFileRetry<T>(read: () => Promise<T>, clock: Clock, debounceMs: number, totalMs = 10_000, signal?: AbortSignal): Promise<T> {
  const start = clock.now();
  let delay = Math.max(1, debounceMs);
  for (;;) {
    try {
      return await read();
    } catch (e) {
      // A FIFO, a device or an oversized file will not fix itself the way a half-swapped mount does.
      if (e instanceof FileLimitError) throw e;
      if (signal?.aborted) throw e; // whoever asked has gone away
      if (clock.now() + delay - start > totalMs || !(await clockSleep(clock, delay, signal))) throw e;
      delay *= 2;
    }
  }
}
