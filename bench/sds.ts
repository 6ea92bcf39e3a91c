// Certificates benchmark: key + CSR + signing round trip against the fake CA over TLS for ECDSA
// P-256 and RSA-2048 (median, p99), and on a cold agent the time from the first SDS request to
// the response, split into the CA's share and ours (target: ours ≤ 5 ms with ECDSA).

import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IstioCaClient } from "../src/ca/client.ts";
import { generateKeyAndCsr, type KeyOptions } from "../src/ca/keygen.ts";
import type { CertificateSigner } from "../src/ca/signer.ts";
import { FileTokenSource } from "../src/ca/token.ts";
import { silentLogger } from "../src/lib/log.ts";
import { newRegistry } from "../src/lib/metrics.ts";
import { PeerAuthorizer } from "../src/lib/peerauth.ts";
import { SecretCache } from "../src/sds/cache.ts";
import { systemClock } from "../src/lib/clock.ts";
import { SecretMetrics } from "../src/sds/metrics.ts";
import { sdsCodec, SECRET_TYPE_URL } from "../src/sds/proto.ts";
import { SdsServer, SDS_SERVICE } from "../src/sds/server.ts";
import { FakeCa } from "../test/support/fake-ca.ts";

const SPIFFE = "spiffe://cluster.local/ns/bench/sa/bench";
const quant = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
const ms = (x: number) => x.toFixed(2);

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "bench-sds-"));
  const ca = await FakeCa.start({ token: "t" });
  writeFileSync(join(dir, "root.pem"), ca.tls!.rootPem);
  writeFileSync(join(dir, "token"), "t");
  const client = new IstioCaClient(
    { address: ca.address, tls: true, rootCertPath: join(dir, "root.pem"), serverName: "istiod.istio-system.svc", headers: {} },
    { tokens: new FileTokenSource(join(dir, "token")), sleep: async () => true },
  );
  const lines = ["## Certificates (SDS + CA)", "", "| Operation | n | median ms | p99 ms |", "|---|---|---|---|"];
  const algs: [string, KeyOptions, number][] = [
    ["ECDSA P-256", { algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, 200],
    ["RSA-2048", { algorithm: "RSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, 40],
  ];
  await client.sign((await generateKeyAndCsr(algs[0]![1], SPIFFE)).csrPem, 3600); // connect + warm the library
  for (const [label, opts, n] of algs) {
    const keygen: number[] = [];
    const total: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const { csrPem } = await generateKeyAndCsr(opts, SPIFFE);
      const t1 = performance.now();
      await client.sign(csrPem, 3600);
      keygen.push(t1 - t0);
      total.push(performance.now() - t0);
    }
    lines.push(`| ${label}: key + CSR | ${n} | ${ms(quant(keygen, 0.5))} | ${ms(quant(keygen, 0.99))} |`);
    lines.push(`| ${label}: key + CSR + sign (fake CA, TLS) | ${n} | ${ms(quant(total, 0.5))} | ${ms(quant(total, 0.99))} |`);
  }
  client.close();

  // Cold agent: a fresh cache and SDS server per run; the first StreamSecrets request for `default`.
  const codec = sdsCodec();
  const firstResponse: number[] = [];
  const ours: number[] = [];
  for (let i = 0; i < 30; i++) {
    let caMs = 0;
    const timed: CertificateSigner = {
      name: "istiod",
      sign: async (csr, ttl) => {
        const t = performance.now();
        const c2 = new IstioCaClient(client.opts, { tokens: new FileTokenSource(join(dir, "token")), sleep: async () => true });
        try {
          return await c2.sign(csr, ttl);
        } finally {
          caMs = performance.now() - t;
          c2.close();
        }
      },
    };
    let keyMs = 0;
    const cache = new SecretCache(
      { signer: timed, keyOptions: algs[0]![1], spiffeId: SPIFFE, ttlSeconds: 3600, rotation: { ratio: 0.5, jitter: 0.01 }, debounceMs: 100 },
      {
        log: silentLogger(),
        metrics: new SecretMetrics(newRegistry(), systemClock),
        clock: systemClock,
        generateKey: async (o, s) => {
          const t = performance.now();
          const r = await generateKeyAndCsr(o, s);
          keyMs = performance.now() - t;
          return r;
        },
      },
    );
    const socket = join(dir, `s${i}.sock`);
    const server = new SdsServer({ socketPath: socket, authorizer: new PeerAuthorizer("*", 0) }, { log: silentLogger(), secrets: cache, clock: systemClock });
    await server.start();
    const c = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure());
    await new Promise<void>((r, j) => c.waitForReady(Date.now() + 5000, (e) => (e ? j(e) : r())));
    const call = c.makeBidiStreamRequest(
      `/${SDS_SERVICE}/StreamSecrets`,
      (b: Buffer) => b,
      (b: Buffer) => b,
    );
    const t0 = performance.now();
    await new Promise<void>((resolve) => {
      call.on("data", () => resolve());
      call.on("error", () => {});
      call.write(codec.encodeRequest({ typeUrl: SECRET_TYPE_URL, resourceNames: ["default"] }));
    });
    const t = performance.now() - t0;
    firstResponse.push(t);
    ours.push(t - caMs - keyMs);
    call.end();
    c.close();
    await server.close();
    cache.close();
  }
  lines.push(
    `| Cold agent: first SDS request → \`default\` response (ECDSA, incl. key + CA) | ${firstResponse.length} | ${ms(quant(firstResponse, 0.5))} | ${ms(quant(firstResponse, 0.99))} |`,
  );
  lines.push(`| … of which the agent after the CA answered (target ≤ 5 ms) | ${ours.length} | ${ms(quant(ours, 0.5))} | ${ms(quant(ours, 0.99))} |`);
  lines.push("", "Fake CA in process over TLS on loopback (grpc-js), signing with @peculiar/x509; 2-core machine.");
  await ca.close();
  rmSync(dir, { recursive: true, force: true });
  return lines.join("\n");
}

if (import.meta.main) console.log(await run());
