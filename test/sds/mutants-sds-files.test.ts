// File-backed secrets, measured by mutation (area sds-files): the bounded reads of a key/chain pair
// and a root bundle (each error naming the resource and the file), the retry loop's schedule and
// bounds, the read shared by concurrent requesters, the re-read after a change (pushed only when
// the content differs; kept when the new files are bad or half-swapped) and the directory watch
// with its debounce. Certificates and their expiry come from openssl; time is a manual clock.

import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileLimitError } from "../../src/lib/boundedfile.ts";
import { LogSink, memoryLogger } from "../../src/lib/log.ts";
import { newRegistry, type Registry } from "../../src/lib/metrics.ts";
import { SdsError } from "../../src/sds/errors.ts";
import { readCertPair, readRootBundle, withFileRetry } from "../../src/sds/files.ts";
import { FileSecrets } from "../../src/sds/filesecrets.ts";
import { SecretMetrics } from "../../src/sds/metrics.ts";
import { CertFileWatcher, linkDirectories } from "../../src/sds/watcher.ts";
import { kubeVolume } from "../support/kube-volume.ts";
import { selfSignedCert } from "../support/self-signed.ts";
import { OPENSSL } from "../ca/openssl.ts";
import { describeRequiring } from "../support/requires.ts";
import { FakeClock, until } from "./fake-clock.ts";

interface Pair {
  chain: string;
  key: string;
  /** notAfter as openssl prints it, in ms. */
  notAfterMs: number;
}

/** A self-signed pair from openssl expiring in `days`, and its notAfter as openssl prints it. */
function makePair(name: string, days: number): Pair {
  const { cert, key } = selfSignedCert(`/CN=${name}`, days);
  const r = spawnSync("openssl", ["x509", "-noout", "-enddate"], { input: cert, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`openssl x509: ${r.stderr}`);
  const end = r.stdout.trim(); // notAfter=Nov 26 15:20:05 2026 GMT
  return { chain: cert, key, notAfterMs: Date.parse(end.slice("notAfter=".length)) };
}

const BAD_CERT = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n";

let pki: { a: Pair; b: Pair; c: Pair };
/** Three self-signed pairs from openssl (once for the file), expiring 2, 3 and 4 days from now. */
function makePki(): void {
  if (pki) return;
  pki = { a: makePair("a", 2), b: makePair("b", 3), c: makePair("c", 4) };
}
const dirs: string[] = [];
const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tmp(prefix = "sds-files-"): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

async function metricLines(reg: Registry, name: string): Promise<string[]> {
  return (await reg.metrics()).split("\n").filter((l) => l.startsWith(name) && !l.startsWith("#"));
}

describeRequiring(OPENSSL, "sds-files: reading certificate files", () => {
  beforeAll(makePki);

  test("a key/chain pair: its text, the clock's now, openssl's notAfter, a content version", async () => {
    const d = tmp();
    writeFileSync(join(d, "cert.pem"), pki.a.chain);
    writeFileSync(join(d, "key.pem"), pki.a.key);
    const item = await readCertPair("file-cert:x", join(d, "cert.pem"), join(d, "key.pem"), 1234);
    expect(item).toMatchObject({
      resourceName: "file-cert:x",
      certificateChain: pki.a.chain,
      privateKey: pki.a.key,
      createdMs: 1234,
      expireMs: pki.a.notAfterMs,
    });
    expect(item.version).toMatch(/^[0-9a-f]{16}$/);
    expect((await readCertPair("file-cert:x", join(d, "cert.pem"), join(d, "key.pem"), 99)).version).toBe(item.version);
    writeFileSync(join(d, "cert.pem"), pki.b.chain);
    writeFileSync(join(d, "key.pem"), pki.b.key);
    expect((await readCertPair("file-cert:x", join(d, "cert.pem"), join(d, "key.pem"), 1234)).version).not.toBe(item.version);
  });

  test("each failure names the resource, what was read and the file", async () => {
    const d = tmp();
    const cert = join(d, "cert.pem");
    const key = join(d, "key.pem");
    const fail = (p: Promise<unknown>) =>
      p.then(
        () => expect.unreachable("read succeeded"),
        (e: SdsError) => e,
      );
    let e = await fail(readCertPair("file-cert:x", cert, key, 0));
    expect(e).toBeInstanceOf(SdsError);
    expect(e.message).toBe(`file-cert:x: reading certificate chain ${cert}: ENOENT`);
    expect(e.resource).toBe("file-cert:x");
    expect((e.cause as NodeJS.ErrnoException).code).toBe("ENOENT");
    writeFileSync(cert, pki.a.chain);
    e = await fail(readCertPair("file-cert:x", cert, key, 0));
    expect(e.message).toBe(`file-cert:x: reading private key ${key}: ENOENT`);
    e = await fail(readCertPair("file-cert:x", cert, "/dev/zero", 0));
    expect(e.message).toBe("file-cert:x: reading private key /dev/zero: is a character device, not a regular file");
    expect(e.resource).toBe("file-cert:x");
    const ac = new AbortController();
    ac.abort(new Error("the stream closed"));
    e = await fail(readCertPair("file-cert:x", cert, key, 0, ac.signal));
    expect(e.message).toBe(`file-cert:x: reading certificate chain ${cert}: the stream closed`);
    e = await fail(readRootBundle("file-root:r", join(d, "none.pem")));
    expect(e.message).toBe(`file-root:r: reading CA bundle ${join(d, "none.pem")}: ENOENT`);
    expect(e.resource).toBe("file-root:r");
    e = await fail(readRootBundle("file-root:r", "/dev/zero"));
    expect(e.message).toBe("file-root:r: reading CA bundle /dev/zero: is a character device, not a regular file");
  });

  test("content checks: no certificate (a key is not one), no key, a broken certificate, a key of another certificate", async () => {
    const d = tmp();
    const cert = join(d, "cert.pem");
    const key = join(d, "key.pem");
    const fail = (p: Promise<unknown>) =>
      p.then(
        () => expect.unreachable("read succeeded"),
        (e: SdsError) => e,
      );
    writeFileSync(cert, pki.a.key);
    writeFileSync(key, pki.a.key);
    let e = await fail(readCertPair("file-cert:x", cert, key, 0));
    expect(e.message).toBe(`file-cert:x: ${cert} has no PEM certificate`);
    expect(e.resource).toBe("file-cert:x");
    writeFileSync(cert, pki.a.chain);
    writeFileSync(key, "not a key\n");
    e = await fail(readCertPair("file-cert:x", cert, key, 0));
    expect(e.message).toBe(`file-cert:x: ${key} has no PEM private key`);
    expect(e.resource).toBe("file-cert:x");
    writeFileSync(cert, BAD_CERT + pki.a.chain);
    writeFileSync(key, pki.a.key);
    e = await fail(readCertPair("file-cert:x", cert, key, 0));
    expect(e.message.startsWith(`file-cert:x: ${cert}: not a valid PEM certificate (`)).toBe(true);
    expect(e.resource).toBe("file-cert:x");
    expect(e.cause).toBeInstanceOf(Error);
    writeFileSync(cert, pki.a.chain);
    writeFileSync(key, pki.b.key);
    e = await fail(readCertPair("file-cert:x", cert, key, 0));
    expect(e.message).toBe(`file-cert:x: private key ${key} does not match the certificate in ${cert}`);
    expect(e.resource).toBe("file-cert:x");
  });

  test("a root bundle: invalid certificates dropped and counted, the valid ones in file order; none valid is an error", async () => {
    const d = tmp();
    const ca = join(d, "ca.pem");
    writeFileSync(ca, pki.b.chain + BAD_CERT + pki.a.chain);
    const { item, invalid } = await readRootBundle("file-root:r", ca);
    expect(invalid).toBe(1);
    expect(item).toMatchObject({ resourceName: "file-root:r", rootCert: pki.b.chain + pki.a.chain, createdMs: 0, expireMs: 0 });
    expect(item.version).toMatch(/^[0-9a-f]{16}$/);
    writeFileSync(ca, BAD_CERT);
    const e = (await readRootBundle("file-root:r", ca).catch((x: SdsError) => x)) as SdsError;
    expect(e.message).toBe(`file-root:r: ${ca} has no valid PEM certificate`);
    expect(e.resource).toBe("file-root:r");
  });
});

/** Run withFileRetry on a manual clock, stepping time to each retry; the attempts' times (from 0) and the outcome. */
async function retrySchedule(opts: {
  debounceMs: number;
  totalMs?: number;
  failures: number;
  error?: () => Error;
  signal?: AbortSignal;
  onAttempt?: (n: number) => void;
}) {
  const clock = new FakeClock(1_000_000);
  const attempts: number[] = [];
  const p = withFileRetry(
    async () => {
      attempts.push(clock.now() - 1_000_000);
      opts.onAttempt?.(attempts.length);
      if (attempts.length <= opts.failures) throw opts.error?.() ?? new Error(`attempt ${attempts.length} failed`);
      return `value after ${attempts.length}`;
    },
    clock,
    opts.debounceMs,
    ...((opts.totalMs !== undefined ? [opts.totalMs] : [undefined]) as [number | undefined]),
    opts.signal,
  );
  let outcome: { value?: string; err?: Error } | undefined;
  p.then(
    (value) => (outcome = { value }),
    (err: Error) => (outcome = { err }),
  );
  while (!outcome) {
    await Bun.sleep(0);
    const at = clock.nextAt();
    if (at !== undefined) clock.advance(at - clock.now());
  }
  return { attempts, outcome, pending: clock.pending() };
}

describe("withFileRetry: backoff from the debounce, doubling, bounded", () => {
  test("a read that keeps failing: retried at 100, 300, 700 ... while the next retry is within 10 s, then its last error", async () => {
    const r = await retrySchedule({ debounceMs: 100, failures: 100 });
    expect(r.attempts).toEqual([0, 100, 300, 700, 1500, 3100, 6300]);
    expect(r.outcome.err?.message).toBe("attempt 7 failed");
    expect(r.pending).toBe(0);
  });

  test("the bound is inclusive: a retry due exactly at the total runs, one due a millisecond later does not", async () => {
    expect((await retrySchedule({ debounceMs: 100, totalMs: 700, failures: 100 })).attempts).toEqual([0, 100, 300, 700]);
    expect((await retrySchedule({ debounceMs: 100, totalMs: 699, failures: 100 })).attempts).toEqual([0, 100, 300]);
    expect((await retrySchedule({ debounceMs: 100, totalMs: 0, failures: 100 })).attempts).toEqual([0]);
  });

  test("a debounce of 0 still waits 1 ms, then doubles", async () => {
    expect((await retrySchedule({ debounceMs: 0, totalMs: 7, failures: 100 })).attempts).toEqual([0, 1, 3, 7]);
  });

  test("success on a later attempt returns its value", async () => {
    const r = await retrySchedule({ debounceMs: 50, failures: 2 });
    expect(r.attempts).toEqual([0, 50, 150]);
    expect(r.outcome.value).toBe("value after 3");
  });

  test("a size or file-type refusal is not retried", async () => {
    const r = await retrySchedule({
      debounceMs: 50,
      failures: 100,
      error: () => new FileLimitError("/dev/zero", 10, "is a character device, not a regular file"),
    });
    expect(r.attempts).toEqual([0]);
    expect(r.outcome.err).toBeInstanceOf(FileLimitError);
    expect(r.pending).toBe(0);
  });

  test("a requester that went away: no retry after the failed attempt; a retry wait ends at the abort", async () => {
    const gone = new AbortController();
    gone.abort();
    const r = await retrySchedule({ debounceMs: 50, failures: 100, signal: gone.signal });
    expect(r.attempts).toEqual([0]);
    expect(r.outcome.err?.message).toBe("attempt 1 failed");
    const later = new AbortController();
    const r2 = await retrySchedule({ debounceMs: 50, failures: 100, signal: later.signal, onAttempt: (n) => n === 2 && queueMicrotask(() => later.abort()) });
    expect(r2.attempts).toEqual([0, 50]);
    expect(r2.outcome.err?.message).toBe("attempt 2 failed");
  });
});

interface FilesRig {
  clock: FakeClock;
  reg: Registry;
  log: ReturnType<typeof memoryLogger>;
  updates: string[];
  files: FileSecrets;
  /** Wait for the watch's debounce timer, then let it fire. */
  settle(): Promise<void>;
  failures(): Promise<string[]>;
}

const DEBOUNCE = 50;

function filesRig(jsonLines?: string[]): FilesRig {
  const clock = new FakeClock();
  const reg = newRegistry();
  const log = memoryLogger();
  if (jsonLines) log.log = new LogSink({ outputLevels: "all:debug", json: true, write: (l) => jsonLines.push(l) }).logger();
  const updates: string[] = [];
  const files = new FileSecrets({
    log: log.log,
    metrics: new SecretMetrics(reg, clock),
    clock,
    debounceMs: DEBOUNCE,
    retryTotalMs: 250,
    onUpdate: (n) => updates.push(n),
  });
  closers.push(() => files.close());
  return {
    clock,
    reg,
    log,
    updates,
    files,
    async settle() {
      await until(() => clock.pending() > 0, "the watch's debounce timer", 5000);
      clock.advance(DEBOUNCE);
    },
    failures: () => metricLines(reg, "istio_agent_num_file_"),
  };
}

const logged = (r: FilesRig, level: string, msg: string) => r.log.lines.some((l) => l.split("\t").slice(1, 3).join("\t") === `${level}\t${msg}`);

/** Step the manual clock through a failing read's retries until `p` settles. */
async function drain<T>(clock: FakeClock, p: Promise<T>): Promise<{ value?: T; err?: Error }> {
  let out: { value?: T; err?: Error } | undefined;
  p.then(
    (value) => (out = { value }),
    (err: Error) => (out = { err }),
  );
  while (!out) {
    await Bun.sleep(1);
    const at = clock.nextAt();
    if (at !== undefined && at > clock.now()) clock.advance(at - clock.now());
  }
  return out;
}

describeRequiring(OPENSSL, "sds-files: file secrets (cache, shared reads, re-reads on change)", () => {
  beforeAll(makePki);

  function mount(d: string, p: Pair, prefix = ""): { cert: string; key: string } {
    writeFileSync(join(d, `${prefix}cert.pem`), p.chain);
    writeFileSync(join(d, `${prefix}key.pem`), p.key);
    return { cert: join(d, `${prefix}cert.pem`), key: join(d, `${prefix}key.pem`) };
  }

  test("read once, then cached (even with the files gone); the pair's expiry exported, a root's not", async () => {
    const r = filesRig();
    const d = tmp();
    const { cert, key } = mount(d, pki.a);
    writeFileSync(join(d, "ca.pem"), pki.c.chain);
    expect(r.files.peek("file-cert:p")).toBeUndefined();
    const item = await r.files.certPair("file-cert:p", cert, key);
    expect(item.certificateChain).toBe(pki.a.chain);
    expect(r.files.peek("file-cert:p")).toBe(item);
    await r.files.root("file-root:r", join(d, "ca.pem"));
    unlinkSync(cert);
    unlinkSync(key);
    expect(await r.files.certPair("file-cert:p", cert, key)).toBe(item);
    const expiry = await metricLines(r.reg, "istio_agent_cert_expiry_seconds");
    expect(expiry).toEqual([`istio_agent_cert_expiry_seconds{resource_name="file-cert:p"} ${(pki.a.notAfterMs - r.clock.now()) / 1000}`]);
  });

  test("concurrent requesters share one read (one retry timer, one failure counted); a failed read is not kept", async () => {
    const r = filesRig();
    const d = tmp();
    const ca = join(d, "ca.pem");
    const one = r.files.root("file-root:r", ca);
    const two = r.files.root("file-root:r", ca);
    await until(() => r.clock.pending() > 0, "the first retry");
    expect(r.clock.pendingMs()).toEqual([DEBOUNCE]);
    const [a, b] = await Promise.all([drain(r.clock, one), drain(r.clock, two)]);
    expect(a.err?.message).toBe(`file-root:r: reading CA bundle ${ca}: ENOENT`);
    expect(b.err).toBe(a.err!);
    expect(r.clock.now() - Date.parse("2026-11-21T00:00:00Z")).toBe(150); // attempts at 0, 50, 150; the next (350) is past 250
    expect(await r.failures()).toEqual(["istio_agent_num_file_watcher_failures_total 0", "istio_agent_num_file_secret_failures_total 1"]);
    writeFileSync(ca, pki.c.chain);
    expect((await r.files.root("file-root:r", ca)).rootCert).toBe(pki.c.chain);
  });

  test("a requester already gone: its own reason, or one naming the resource; a read stopped by leaving is no failure", async () => {
    const r = filesRig();
    const d = tmp();
    const reason = new Error("the stream closed");
    const gone = AbortSignal.abort(reason);
    expect(await r.files.root("file-root:r", join(d, "ca.pem"), gone).catch((e) => e)).toBe(reason);
    const e = (await r.files.root("file-root:s", join(d, "ca.pem"), AbortSignal.abort("not an Error")).catch((x: Error) => x)) as Error;
    expect(e.message).toBe("file-root:s: the requester went away");
    const leaving = new AbortController();
    const p = r.files.root("file-root:t", join(d, "other.pem"), leaving.signal);
    await until(() => r.clock.pendingMs().length >= 3, "the retries of three reads");
    leaving.abort();
    expect(((await p.catch((x: Error) => x)) as Error).message).toBe(`file-root:t: reading CA bundle ${join(d, "other.pem")}: ENOENT`);
    const metrics = await r.failures();
    expect(metrics).toContain("istio_agent_num_file_secret_failures_total 0");
  });

  test("invalid certificates in a root file are skipped with a warning naming the count and the file", async () => {
    const r = filesRig();
    const d = tmp();
    writeFileSync(join(d, "ca.pem"), BAD_CERT + pki.c.chain + BAD_CERT);
    expect((await r.files.root("file-root:r", join(d, "ca.pem"))).rootCert).toBe(pki.c.chain);
    expect(logged(r, "warn", `file-root:r: skipped 2 invalid certificate(s) in ${join(d, "ca.pem")}`)).toBe(true);
    writeFileSync(join(d, "ok.pem"), pki.c.chain);
    await r.files.root("file-root:ok", join(d, "ok.pem"));
    expect(r.log.lines.filter((l) => l.includes("skipped"))).toHaveLength(1);
  });

  test("under --log_as_json the skipped-certificates warning carries the resource and the path", async () => {
    const lines: string[] = [];
    const r = filesRig(lines);
    const d = tmp();
    writeFileSync(join(d, "ca.pem"), BAD_CERT + pki.c.chain);
    await r.files.root("file-root:r", join(d, "ca.pem"));
    const warn = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((j) => String(j.msg).includes("skipped"));
    expect(warn).toMatchObject({ resource: "file-root:r", path: join(d, "ca.pem") });
  });

  test("a change is re-read and pushed once, with the new expiry and a line naming the files", async () => {
    const r = filesRig();
    const d = tmp();
    const { cert, key } = mount(d, pki.a);
    await r.files.certPair("file-cert:p", cert, key);
    mount(d, pki.b);
    await r.settle();
    await until(() => r.updates.length > 0, "the push");
    expect(r.updates).toEqual(["file-cert:p"]);
    expect(r.files.peek("file-cert:p")?.certificateChain).toBe(pki.b.chain);
    expect(logged(r, "info", "file-cert:p: certificate files changed, pushing new version")).toBe(true);
    expect(r.log.lines.find((l) => l.includes("pushing new version"))?.endsWith(`\tfiles=${cert},${key}`)).toBe(true);
    expect(await metricLines(r.reg, "istio_agent_cert_expiry_seconds")).toEqual([
      `istio_agent_cert_expiry_seconds{resource_name="file-cert:p"} ${(pki.b.notAfterMs - r.clock.now()) / 1000}`,
    ]);
  });

  test("files rewritten with the same content are not pushed (the root changed beside them is)", async () => {
    const r = filesRig();
    const d = tmp();
    const { cert, key } = mount(d, pki.a);
    writeFileSync(join(d, "ca.pem"), pki.c.chain);
    await r.files.certPair("file-cert:p", cert, key);
    await r.files.root("file-root:r", join(d, "ca.pem"));
    mount(d, pki.a);
    writeFileSync(join(d, "ca.pem"), pki.a.chain);
    await r.settle();
    await until(() => r.updates.includes("file-root:r"), "the root's push");
    expect(r.updates).toEqual(["file-root:r"]);
    // A root has no expiry to export, before or after its change.
    expect((await metricLines(r.reg, "istio_agent_cert_expiry_seconds")).map((l) => l.split("}")[0])).toEqual([
      'istio_agent_cert_expiry_seconds{resource_name="file-cert:p"',
    ]);
  });

  test("half-swapped (a file missing): nothing read or counted until the swap completes", async () => {
    const r = filesRig();
    const d = tmp();
    const { cert, key } = mount(d, pki.a);
    writeFileSync(join(d, "ca.pem"), pki.c.chain);
    await r.files.certPair("file-cert:p", cert, key);
    await r.files.root("file-root:r", join(d, "ca.pem"));
    unlinkSync(key);
    writeFileSync(cert, pki.b.chain);
    writeFileSync(join(d, "ca.pem"), pki.a.chain);
    await r.settle();
    await until(() => r.updates.includes("file-root:r"), "the root's push");
    expect(r.updates).toEqual(["file-root:r"]);
    expect(await r.failures()).toContain("istio_agent_num_file_secret_failures_total 0");
    writeFileSync(key, pki.b.key);
    await r.settle();
    await until(() => r.updates.length === 2, "the pair's push");
    expect(r.updates).toEqual(["file-root:r", "file-cert:p"]);
    expect(r.files.peek("file-cert:p")?.privateKey).toBe(pki.b.key);
  });

  test("bad new files: the previous version is kept, the failure counted and logged", async () => {
    const r = filesRig();
    const d = tmp();
    const { cert, key } = mount(d, pki.a);
    await r.files.certPair("file-cert:p", cert, key);
    writeFileSync(cert, pki.b.key);
    await r.settle();
    const msg = `file-cert:p: re-reading changed files failed, still serving the previous version: file-cert:p: ${cert} has no PEM certificate`;
    await until(() => logged(r, "error", msg), "the error line");
    expect(await r.failures()).toContain("istio_agent_num_file_secret_failures_total 1");
    expect(r.files.peek("file-cert:p")?.certificateChain).toBe(pki.a.chain);
    expect(r.updates).toEqual([]);
  });

  test("a resource whose first read failed is not re-read on a change (the root beside it is)", async () => {
    const r = filesRig();
    const d = tmp();
    writeFileSync(join(d, "ca.pem"), pki.c.chain);
    await r.files.root("file-root:r", join(d, "ca.pem"));
    expect((await drain(r.clock, r.files.root("file-root:missing", join(d, "missing.pem")))).err).toBeDefined();
    expect(await r.failures()).toContain("istio_agent_num_file_secret_failures_total 1");
    writeFileSync(join(d, "missing.pem"), pki.a.chain);
    writeFileSync(join(d, "ca.pem"), pki.b.chain);
    await r.settle();
    await until(() => r.updates.includes("file-root:r"), "the root's push");
    expect(r.updates).toEqual(["file-root:r"]);
    expect(await r.failures()).toContain("istio_agent_num_file_secret_failures_total 1");
    expect(r.log.lines.filter((l) => l.includes("re-reading"))).toEqual([]);
  });

  test("only the resources whose files changed are re-read", async () => {
    const r = filesRig();
    const x = tmp();
    const y = tmp();
    // X's files are links into X/sub: a change there is no event in X (the link's directory).
    mkdirSync(join(x, "sub"));
    mount(join(x, "sub"), pki.a);
    symlinkSync(join(x, "sub", "cert.pem"), join(x, "cert.pem"));
    symlinkSync(join(x, "sub", "key.pem"), join(x, "key.pem"));
    writeFileSync(join(y, "ca.pem"), pki.c.chain);
    await r.files.certPair("file-cert:x", join(x, "cert.pem"), join(x, "key.pem"));
    await r.files.root("file-root:y", join(y, "ca.pem"));
    mount(join(x, "sub"), pki.b);
    writeFileSync(join(y, "ca.pem"), pki.a.chain);
    await r.settle();
    await until(() => r.updates.includes("file-root:y"), "y's push");
    expect(r.updates).toEqual(["file-root:y"]);
    expect(r.files.peek("file-cert:x")?.certificateChain).toBe(pki.a.chain);
  });

  test("a pair split across two directories is pushed when either changes; unnormalised paths match their events", async () => {
    const r = filesRig();
    const x = tmp();
    const y = tmp();
    writeFileSync(join(x, "cert.pem"), pki.a.chain);
    writeFileSync(join(y, "key.pem"), pki.a.key);
    mkdirSync(join(x, "sub"));
    await r.files.certPair("file-cert:split", join(x, "sub", "..", "cert.pem"), join(y, ".", "key.pem"));
    writeFileSync(join(x, "cert.pem"), pki.b.chain);
    writeFileSync(join(y, "key.pem"), pki.b.key);
    await until(() => r.clock.pending() === 2, "both directories' timers", 5000);
    r.clock.advance(DEBOUNCE);
    await until(() => r.updates.length > 0, "the push", 5000);
    expect(r.updates[0]).toBe("file-cert:split");
    expect(r.files.peek("file-cert:split")?.certificateChain).toBe(pki.b.chain);
  });

  test("a directory that cannot be watched is counted and logged, naming it", async () => {
    const r = filesRig();
    const d = tmp();
    const nowhere = join(d, "no", "such");
    void r.files.root("file-root:n", join(nowhere, "ca.pem")).catch(() => undefined);
    expect(await r.failures()).toContain("istio_agent_num_file_watcher_failures_total 1");
    const line = r.log.lines.find((l) => l.includes("cannot watch"));
    expect(line?.split("\t").slice(1).join("\t").startsWith(`error\tcannot watch certificate directory ${nowhere}: `)).toBe(true);
  });

  test("after close, changes are no longer watched (a second watcher of the same directory sees them)", async () => {
    const r = filesRig();
    const other = filesRig();
    const d = tmp();
    writeFileSync(join(d, "ca.pem"), pki.c.chain);
    await r.files.root("file-root:r", join(d, "ca.pem"));
    await other.files.root("file-root:r", join(d, "ca.pem"));
    r.files.close();
    writeFileSync(join(d, "ca.pem"), pki.a.chain);
    await until(() => other.clock.pending() > 0, "the second watcher's timer");
    await Bun.sleep(20);
    expect(r.clock.pending()).toBe(0);
  });
});

/** Inodes (hex) of everything this process watches with inotify, as the kernel lists them in /proc/self/fdinfo. */
function inotifyInodes(): string[] {
  const out: string[] = [];
  for (const fd of readdirSync("/proc/self/fdinfo")) {
    let text = "";
    try {
      text = readFileSync(`/proc/self/fdinfo/${fd}`, "utf8");
    } catch {
      continue; // closed meanwhile
    }
    for (const m of text.matchAll(/^inotify wd:[0-9a-f]+ ino:([0-9a-f]+) /gm)) out.push(m[1]!);
  }
  return out.sort();
}
const inode = (path: string) => statSync(path).ino.toString(16);

/** A watcher on its own manual clock, recording what it reports. */
function watcherRig() {
  const clock = new FakeClock();
  const changes: string[][] = [];
  const errors: string[] = [];
  const w = new CertFileWatcher({ clock, debounceMs: DEBOUNCE, onChange: (p) => changes.push(p), onError: (dir, e) => errors.push(`${dir}: ${e.message}`) });
  closers.push(() => w.close());
  return { clock, changes, errors, w, seen: () => until(() => clock.pending() > 0, "the watch's debounce timer", 5000) };
}

describe("CertFileWatcher: directories, links, debounce", () => {
  test("events within the debounce make one report, of every file watched in that directory, after the debounce", async () => {
    const d = tmp();
    const r = watcherRig();
    r.w.add(join(d, "a.pem"));
    r.w.add(join(d, "b.pem"));
    r.w.add(join(d, "a.pem"));
    writeFileSync(join(d, "a.pem"), "1");
    await r.seen();
    writeFileSync(join(d, "b.pem"), "2");
    writeFileSync(join(d, "other"), "3");
    await Bun.sleep(30);
    expect(r.clock.pendingMs()).toEqual([DEBOUNCE]);
    r.clock.advance(DEBOUNCE - 1);
    expect(r.changes).toEqual([]);
    r.clock.advance(1);
    expect(r.changes).toEqual([[join(d, "a.pem"), join(d, "b.pem")]]);
    expect(r.clock.pending()).toBe(0);
    writeFileSync(join(d, "a.pem"), "4");
    await r.seen();
    r.clock.advance(DEBOUNCE);
    expect(r.changes).toHaveLength(2);
  });

  test("a file not there yet: its creation is reported", async () => {
    const d = tmp();
    const r = watcherRig();
    r.w.add(join(d, "later.pem"));
    writeFileSync(join(d, "later.pem"), "x");
    await r.seen();
    r.clock.advance(DEBOUNCE);
    expect(r.changes).toEqual([[join(d, "later.pem")]]);
  });

  test("a link into another directory (even one whose name starts with the link's): that directory is watched too", async () => {
    const base = tmp();
    const links = join(base, "certs");
    const target = join(base, "certs-data");
    mkdirSync(links);
    mkdirSync(target);
    writeFileSync(join(target, "ca.pem"), "1");
    symlinkSync(join(target, "ca.pem"), join(links, "ca.pem"));
    const r = watcherRig();
    r.w.add(join(links, "ca.pem"));
    writeFileSync(join(target, "ca.pem"), "2");
    await r.seen();
    r.clock.advance(DEBOUNCE);
    expect(r.changes).toEqual([[join(links, "ca.pem")]]);
  });

  test("a link into a subdirectory, or into a system directory, adds no watch (the ..data swap is seen in the link's directory)", async () => {
    const d = tmp();
    mkdirSync(join(d, "..2026_11_24"));
    writeFileSync(join(d, "..2026_11_24", "ca.pem"), "1");
    symlinkSync(join(d, "..2026_11_24", "ca.pem"), join(d, "ca.pem"));
    const inTmp = join(tmpdir(), `mutants-sds-files-${process.pid}-${Date.now()}.pem`);
    writeFileSync(inTmp, "1");
    closers.push(() => rmSync(inTmp, { force: true }));
    const other = tmp();
    symlinkSync(inTmp, join(other, "sys.pem"));
    const r = watcherRig();
    r.w.add(join(d, "ca.pem"));
    r.w.add(join(other, "sys.pem"));
    // Sentinels: watchers of the targets' directories themselves see the writes.
    const sub = watcherRig();
    sub.w.add(join(d, "..2026_11_24", "ca.pem"));
    const sys = watcherRig();
    sys.w.add(inTmp);
    writeFileSync(join(d, "..2026_11_24", "ca.pem"), "2");
    writeFileSync(inTmp, "2");
    await sub.seen();
    await sys.seen();
    await Bun.sleep(20);
    expect(r.clock.pending()).toBe(0);
  });

  test("close cancels a pending report and stops watching", async () => {
    const d = tmp();
    const r = watcherRig();
    r.w.add(join(d, "a.pem"));
    writeFileSync(join(d, "a.pem"), "1");
    await r.seen();
    r.w.close();
    expect(r.clock.pending()).toBe(0);
    r.clock.advance(DEBOUNCE);
    const sentinel = watcherRig();
    sentinel.w.add(join(d, "a.pem"));
    writeFileSync(join(d, "a.pem"), "2");
    await sentinel.seen();
    await Bun.sleep(20);
    expect(r.clock.pending()).toBe(0);
    expect(r.changes).toEqual([]);
  });

  test("the kernel's watches: the link's directory, plus its target's unless a subdirectory or a system directory; none after close", async () => {
    const base = tmp();
    // [case, link target, the directory the link is in (a new one when omitted), target's directory watched]
    const cases: [string, string, string | undefined, boolean][] = [
      ["sibling directory", join(base, "certs-data", "ca.pem"), join(base, "certs"), true],
      ["subdirectory", join(base, "certs", "..data", "ca.pem"), join(base, "certs"), false],
      ["/tmp", join(tmpdir(), `mutants-sds-files-${process.pid}.pem`), undefined, false],
      ["/etc", "/etc/passwd", undefined, false],
      ["/var", "/var/log", undefined, false],
      ["/usr", "/usr/lib", undefined, false],
      ["/", "/etc", undefined, false],
    ];
    mkdirSync(join(base, "certs-data"));
    mkdirSync(join(base, "certs", "..data"), { recursive: true });
    writeFileSync(join(base, "certs-data", "ca.pem"), "1");
    writeFileSync(join(base, "certs", "..data", "ca.pem"), "1");
    writeFileSync(cases[2]![1], "1");
    closers.push(() => rmSync(cases[2]![1], { force: true }));
    // Bun registers and removes watches on its watcher thread, in order: a sentinel watch added
    // last, once listed, shows that every earlier request has been carried out.
    const settled = async (): Promise<string[]> => {
      const s = mkdtempSync(join(base, "sentinel-"));
      const sentinel = watcherRig();
      sentinel.w.add(join(s, "x"));
      await until(() => inotifyInodes().includes(inode(s)), "the sentinel's watch", 3000);
      const list = inotifyInodes().filter((x) => x !== inode(s));
      sentinel.w.close();
      return list;
    };
    const before = await settled();
    for (const [i, [what, target, dir, watched]] of cases.entries()) {
      const links = dir ?? mkdtempSync(join(base, "links-"));
      symlinkSync(target, join(links, `ca-${i}.pem`));
      const r = watcherRig();
      r.w.add(join(links, `ca-${i}.pem`));
      const added = (await settled()).filter((x) => !before.includes(x));
      const want = [inode(links), ...(watched ? [inode(join(target, ".."))] : [])];
      expect(`${what}: ${added.sort().join(" ")}`).toBe(`${what}: ${want.sort().join(" ")}`);
      r.w.close();
      expect((await settled()).filter((x) => added.includes(x))).toEqual([]);
    }
  });

  test("linkDirectories: the directory of every link met along the way, once each; system directories left out; a loop ends", () => {
    const base = tmp();
    const vol = kubeVolume(join(base, "vol"), { "tls.crt": "1" });
    mkdirSync(join(base, "stable"));
    symlinkSync(join(vol.dir, "tls.crt"), join(base, "stable", "cert.pem"));
    // stable/cert.pem -> vol/tls.crt -> vol/..data/tls.crt (..data -> ..<timestamp>): two link directories.
    expect(linkDirectories(join(base, "stable", "cert.pem"))).toEqual([join(base, "stable"), vol.dir]);
    // A linked directory on the way counts as a link too.
    symlinkSync(join(base, "stable"), join(base, "latest"));
    expect(linkDirectories(join(base, "latest", "cert.pem"))).toEqual([base, join(base, "stable"), vol.dir]);
    expect(linkDirectories(join(base, "plain.pem"))).toEqual([]);
    const inTmp = join(tmpdir(), `mutants-sds-link-${process.pid}.pem`);
    symlinkSync(join(base, "stable", "cert.pem"), inTmp);
    closers.push(() => rmSync(inTmp, { force: true }));
    expect(linkDirectories(inTmp)).toEqual([join(base, "stable"), vol.dir]);
    symlinkSync(join(base, "loop-b"), join(base, "loop-a"));
    symlinkSync(join(base, "loop-a"), join(base, "loop-b"));
    expect(linkDirectories(join(base, "loop-a", "x.pem"))).toEqual([base]);
  });

  test("a stable link into a Kubernetes-style volume: every rotation is reported, not only the first (Istio #61161)", async () => {
    const base = tmp();
    const vol = kubeVolume(join(base, "vol"), { "tls.crt": "0" });
    mkdirSync(join(base, "stable"));
    symlinkSync(join(vol.dir, "tls.crt"), join(base, "stable", "cert.pem"));
    const r = watcherRig();
    r.w.add(join(base, "stable", "cert.pem"));
    for (let n = 1; n <= 3; n++) {
      const before = r.changes.length;
      vol.update({ "tls.crt": String(n) });
      await r.seen();
      // The swap touches two watched directories (the volume's and the removed one): drain both.
      while (r.clock.pending() > 0) {
        r.clock.advance(DEBOUNCE);
        await Bun.sleep(30);
      }
      expect(r.changes.length).toBeGreaterThan(before);
      for (const c of r.changes.slice(before)) expect(c).toEqual([join(base, "stable", "cert.pem")]);
    }
  });

  test("a linked directory retargeted: after the change, the new target directory is the one watched", async () => {
    const base = tmp();
    for (const v of ["v1", "v2"]) {
      mkdirSync(join(base, v));
      writeFileSync(join(base, v, "ca.pem"), v);
    }
    const links = join(base, "links");
    mkdirSync(links);
    symlinkSync(join(base, "v1"), join(links, "latest"));
    const r = watcherRig();
    r.w.add(join(links, "latest", "ca.pem"));
    // ln -sfn: a new link renamed over the old one.
    symlinkSync(join(base, "v2"), join(links, "latest.tmp"));
    renameSync(join(links, "latest.tmp"), join(links, "latest"));
    await r.seen();
    r.clock.advance(DEBOUNCE);
    expect(r.changes).toEqual([[join(links, "latest", "ca.pem")]]);
    while (r.clock.pending() > 0 || (await Bun.sleep(30), r.clock.pending() > 0)) r.clock.advance(DEBOUNCE);
    // A write in place in v2 (not the link's directory) is reported: v2 is watched now.
    const before = r.changes.length;
    writeFileSync(join(base, "v2", "ca.pem"), "v2b");
    await r.seen();
    r.clock.advance(DEBOUNCE);
    expect(r.changes.length).toBe(before + 1);
  });

  test("a directory that cannot be watched is reported with the directory; close after it is fine", () => {
    const d = tmp();
    const r = watcherRig();
    r.w.add(join(d, "gone", "ca.pem"));
    r.w.add(join(d, "gone", "key.pem"));
    expect(() => r.w.close()).not.toThrow();
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]!.startsWith(`${join(d, "gone")}: `)).toBe(true);
    expect(r.errors[0]).toContain("ENOENT");
  });

  test("the watch does not keep the process alive", () => {
    const d = tmp();
    writeFileSync(join(d, "ca.pem"), "1");
    const script = `import { CertFileWatcher } from ${JSON.stringify(join(import.meta.dir, "../../src/sds/watcher.ts"))};
new CertFileWatcher({ clock: { now: () => 0, timer: () => ({ cancel() {} }), sleep: async () => true }, debounceMs: 1, onChange() {}, onError(d, e) { console.log("error", d, e.message); } }).add(${JSON.stringify(join(d, "ca.pem"))});
console.log("watching");`;
    writeFileSync(join(d, "w.ts"), script);
    const r = spawnSync(process.execPath, [join(d, "w.ts")], { encoding: "utf8", timeout: 5000 });
    expect(r.stdout).toBe("watching\n");
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
  });
});
