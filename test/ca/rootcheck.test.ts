// The root bundle's check once per content (src/ca/rootcheck.ts): bytes already found good are
// not parsed again; anything else is, so a broken or rotated root is still seen at the next dial.

import { expect } from "bun:test";
import { RootBundleCheck } from "../../src/ca/rootcheck.ts";
import { testRequiring } from "../support/requires.ts";
import { selfSignedCert } from "../support/self-signed.ts";
import { OPENSSL } from "./openssl.ts";

testRequiring(OPENSSL, "the same bytes are parsed once; other bytes are parsed; a broken bundle is named every time", () => {
  const a = Buffer.from(selfSignedCert().cert);
  const b = Buffer.from(selfSignedCert().cert + selfSignedCert().cert);
  const broken = Buffer.from("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
  const check = new RootBundleCheck();
  expect(check.problem("/roots/a.pem", a)).toBeUndefined();
  expect(check.problem("/roots/a.pem", Buffer.from(a))).toBeUndefined();
  expect(check.parses).toBe(1);
  expect(check.problem("/roots/b.pem", b)).toBeUndefined();
  expect(check.parses).toBe(2);
  for (let i = 0; i < 2; i++)
    expect(check.problem("/roots/x.pem", broken)).toStartWith("root certificate /roots/x.pem: PEM block 1 is not a valid certificate");
  expect(check.parses).toBe(4);
  expect(check.problem("/roots/x.pem", Buffer.from("plain text"))).toStartWith(
    'root certificate /roots/x.pem is not PEM (no "-----BEGIN CERTIFICATE-----" block',
  );
  expect(check.parses).toBe(5);
  expect(check.problem("/roots/b.pem", b)).toBeUndefined(); // the last good bundle: known
  expect(check.problem("/roots/a.pem", a)).toBeUndefined(); // no longer the last good one: parsed again
  expect(check.parses).toBe(6);
});
