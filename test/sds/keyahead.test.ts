// The first workload key generated ahead (src/sds/keyahead.ts): started at once for RSA, handed
// to the first generation with the same options only, never for ECDSA, and a failure of it is the
// first generation's error (not an unhandled rejection), after which keys are fresh again.

import { expect, test } from "bun:test";
import type { KeyOptions, RsaKeyPairDer } from "../../src/ca/keygen.ts";
import { keyAhead } from "../../src/sds/keyahead.ts";

const RSA: KeyOptions = { algorithm: "RSA", rsaKeySize: 2048, curve: "P256", pkcs8: false };
const EC: KeyOptions = { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false };
const PAIR = { publicKey: Buffer.from("pub"), privateKey: Buffer.from("priv") };

function rig(o: KeyOptions, ahead: () => RsaKeyPairDer = () => Promise.resolve(PAIR)) {
  const events: string[] = [];
  const started: RsaKeyPairDer[] = [];
  const gen = keyAhead(
    o,
    (bits) => {
      events.push(`start ${bits}`);
      const p = ahead();
      started.push(p);
      return p;
    },
    async (ko, spiffe, rsaStarted) => {
      events.push(`generate ${ko.algorithm} ${spiffe} ${rsaStarted === undefined ? "fresh" : rsaStarted === started[0] ? "ahead" : "other"}`);
      if (rsaStarted) await rsaStarted;
      return { keyPem: "key", csrPem: "csr" };
    },
  );
  return { gen, events };
}

test("RSA: the key starts before anyone asks, the first generation gets it, later ones are fresh", async () => {
  const r = rig(RSA);
  expect(r.events).toEqual(["start 2048"]);
  await r.gen(RSA, "spiffe://a");
  await r.gen(RSA, "spiffe://a");
  expect(r.events).toEqual(["start 2048", "generate RSA spiffe://a ahead", "generate RSA spiffe://a fresh"]);
});

test("ECDSA: nothing is started ahead", async () => {
  const r = rig(EC);
  await r.gen(EC, "spiffe://a");
  expect(r.events).toEqual(["generate ECDSA spiffe://a fresh"]);
});

test("other options than the ones started for get a fresh key", async () => {
  const r = rig(RSA);
  await r.gen({ ...RSA, rsaKeySize: 4096 }, "spiffe://a");
  await r.gen(RSA, "spiffe://a");
  expect(r.events).toEqual(["start 2048", "generate RSA spiffe://a fresh", "generate RSA spiffe://a fresh"]);
});

test("a key that failed to generate fails the first generation only, and is no unhandled rejection", async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on("unhandledRejection", onUnhandled);
  try {
    const r = rig(RSA, () => Promise.reject(new Error("no entropy")));
    // Let the rejection settle before anyone asks (as while the start path runs).
    await new Promise((resolve) => setTimeout(resolve, 20));
    await expect(r.gen(RSA, "spiffe://a")).rejects.toThrow("no entropy");
    await r.gen(RSA, "spiffe://a");
    expect(r.events).toEqual(["start 2048", "generate RSA spiffe://a ahead", "generate RSA spiffe://a fresh"]);
    expect(unhandled).toEqual([]);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});
