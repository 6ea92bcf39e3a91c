// lazySigner: the real signer is built once, on prepare() or the first CSR; a failed build is
// retried by the next CSR; close() reaches the built signer.

import { expect, test } from "bun:test";
import { lazySigner } from "../../src/ca/lazy.ts";
import type { CertificateSigner } from "../../src/ca/signer.ts";

function fakeBuild(failFirst = 0) {
  const state = { builds: 0, closed: 0, signed: [] as string[] };
  const build = async (): Promise<CertificateSigner> => {
    state.builds++;
    if (state.builds <= failFirst) throw new Error(`build ${state.builds} failed`);
    return { name: "inner", sign: async (csr) => (state.signed.push(csr), ["leaf", "root"]), close: () => void state.closed++ };
  };
  return { state, build };
}

test("nothing is built until prepare() or sign(); then exactly once", async () => {
  const { state, build } = fakeBuild();
  const s = lazySigner("local", build);
  expect(s.name).toBe("local");
  expect(state.builds).toBe(0);
  s.prepare!();
  const [a, b] = await Promise.all([s.sign("csr1", 60), s.sign("csr2", 60)]);
  expect(a).toEqual(["leaf", "root"]);
  expect(b).toEqual(["leaf", "root"]);
  expect(state.builds).toBe(1);
  expect(state.signed).toEqual(["csr1", "csr2"]);
  s.close!();
  expect(state.closed).toBe(1);
});

test("a failed build is reported by sign() and retried by the next one", async () => {
  const { state, build } = fakeBuild(1);
  const s = lazySigner("istiod", build);
  await expect(s.sign("csr", 60)).rejects.toThrow("build 1 failed");
  expect(await s.sign("csr", 60)).toEqual(["leaf", "root"]);
  expect(state.builds).toBe(2);
});

test("closed before the build finished: the built signer is closed at once", async () => {
  const { state, build } = fakeBuild();
  const s = lazySigner("istiod", build);
  const pending = s.sign("csr", 60);
  s.close!();
  await pending;
  expect(state.closed).toBe(1);
});
