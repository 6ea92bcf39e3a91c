// The CA client's edges that client.test.ts leaves open (mutation survivors): error kinds and
// exact messages per gRPC code, the cause of a config error, a failing token source, retries
// without an onRetry hook, plaintext, SYSTEM/absent roots, the client certificate (PROV_CERT)
// presented only when both files exist, the :authority sent, and when the channel is rebuilt.

import { describe, expect, test, beforeAll, afterAll, beforeEach } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IstioCaClient } from "../../src/ca/client.ts";
import { CaError } from "../../src/ca/errors.ts";
import { generateKeyAndCsr } from "../../src/ca/keygen.ts";
import { FileTokenSource } from "../../src/ca/token.ts";
import { LocalCa } from "../../src/ca/local.ts";
import { caCodec, caServiceDefinition, type CertificateRequest, type CertificateResponse } from "../../src/ca/proto.ts";
import { FakeCa, servingCert } from "../support/fake-ca.ts";

const SPIFFE = "spiffe://cluster.local/ns/ns1/sa/sa1";
const PEM_CERT = "-----BEGIN CERTIFICATE-----";
let ca: FakeCa;
let plain: FakeCa;
let dir: string;
let csr: string;
const sleeps: number[] = [];
let retries = 0;

type Opts = ConstructorParameters<typeof IstioCaClient>[0];
type Deps = ConstructorParameters<typeof IstioCaClient>[1];

function client(over: Partial<Opts> = {}, deps: Partial<Deps> = {}): IstioCaClient {
  return new IstioCaClient(
    {
      address: ca.address,
      tls: true,
      rootCertPath: join(dir, "root.pem"),
      serverName: "istiod.istio-system.svc",
      headers: { ClusterID: "Kubernetes" },
      ...over,
    },
    {
      tokens: new FileTokenSource(join(dir, "token")),
      sleep: async (ms) => (sleeps.push(ms), true),
      random: () => 0.5,
      onRetry: () => retries++,
      attemptTimeoutMs: 5000,
      ...deps,
    },
  );
}

async function failure(c: IstioCaClient): Promise<CaError> {
  const e = await c.sign(csr, 60).then(
    () => new Error("signed, expected a failure"),
    (x) => x,
  );
  expect(e).toBeInstanceOf(CaError);
  return e as CaError;
}

beforeAll(async () => {
  ca = await FakeCa.start({ spiffeId: SPIFFE });
  plain = await FakeCa.start({ spiffeId: SPIFFE, plaintext: true });
  dir = mkdtempSync(join(tmpdir(), "caclient-mut-"));
  writeFileSync(join(dir, "root.pem"), ca.tls!.rootPem);
  const other = await servingCert();
  writeFileSync(join(dir, "other-root.pem"), other.rootPem);
  csr = (await generateKeyAndCsr({ algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, SPIFFE)).csrPem;
});
afterAll(async () => {
  await ca.close();
  await plain.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  ca.mode = "ok";
  ca.failCode = grpc.status.UNAVAILABLE;
  ca.requests.length = 0;
  plain.requests.length = 0;
  sleeps.length = 0;
  retries = 0;
  writeFileSync(join(dir, "token"), "good\n");
  writeFileSync(join(dir, "root.pem"), ca.tls!.rootPem);
});

describe("IstioCaClient: what it reports", () => {
  test("is named istiod and returns the chain as PEM certificates", async () => {
    const c = client();
    expect(c.name).toBe("istiod");
    const chain = await c.sign(csr, 60);
    expect(chain.length).toBe(2);
    for (const pem of chain) expect(pem.startsWith(PEM_CERT)).toBe(true);
    c.close();
  });

  test("without CSR metadata the request carries none", async () => {
    const c = client({ csrMetadata: undefined });
    await c.sign(csr, 60);
    expect(ca.requests[0]!.metadata).toEqual({});
    c.close();
  });

  test("a short chain is a bad-response error", async () => {
    ca.mode = "short-chain";
    const c = client();
    const e = await failure(c);
    expect(e.kind).toBe("bad-response");
    expect(e.message).toBe(`CA ${ca.address} returned 1 certificate(s); want the workload certificate and at least the root`);
    c.close();
  });

  test("INVALID_ARGUMENT is a signing error with the CA's details, not retried", async () => {
    ca.mode = "fail";
    ca.failCode = grpc.status.INVALID_ARGUMENT;
    const c = client();
    const e = await failure(c);
    expect(e.kind).toBe("signing");
    expect(e.code).toBe(3);
    expect(e.message).toBe(`CA ${ca.address}: CSR failed: INVALID_ARGUMENT: fake CA told to fail`);
    expect(ca.requests.length).toBe(1);
    c.close();
  });

  test("UNAVAILABLE and DEADLINE_EXCEEDED from the CA are unavailable errors, retried 5 attempts", async () => {
    for (const [code, name] of [
      [grpc.status.UNAVAILABLE, "UNAVAILABLE"],
      [grpc.status.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"],
    ] as const) {
      ca.mode = "fail";
      ca.failCode = code;
      ca.requests.length = 0;
      const c = client();
      const e = await failure(c);
      expect(e.kind).toBe("unavailable");
      expect(e.message).toBe(`CA ${ca.address}: CSR failed: ${name}: fake CA told to fail`);
      expect(ca.requests.length).toBe(5);
      c.close();
    }
  });

  test("INTERNAL is retried but stays a signing error", async () => {
    ca.mode = "fail";
    ca.failCode = grpc.status.INTERNAL;
    const c = client();
    const e = await failure(c);
    expect(e.kind).toBe("signing");
    expect(ca.requests.length).toBe(5);
    c.close();
  });

  test("PERMISSION_DENIED is a rejected token, naming the token file, not retried", async () => {
    ca.mode = "fail";
    ca.failCode = grpc.status.PERMISSION_DENIED;
    const c = client();
    const e = await failure(c);
    expect(e.kind).toBe("rejected-token");
    expect(e.message).toBe(`CA ${ca.address} rejected the token from token file ${join(dir, "token")}: fake CA told to fail`);
    expect(ca.requests.length).toBe(1);
    c.close();
  });

  test("a token source that throws ends the CSR as unavailable after one try", async () => {
    const c = client(
      {},
      {
        tokens: {
          describe: "a broken source",
          token: async () => {
            throw new Error("token source broke");
          },
        },
      },
    );
    const e = await failure(c);
    expect(e.kind).toBe("unavailable");
    expect(e.message).toBe("Error: token source broke");
    expect(ca.requests.length).toBe(0);
    c.close();
  });

  test("retries work without an onRetry hook", async () => {
    ca.mode = "fail";
    const c = client({}, { onRetry: undefined });
    const e = await failure(c);
    expect(e.message).toBe(`CA ${ca.address}: CSR failed: UNAVAILABLE: fake CA told to fail`);
    expect(sleeps).toEqual([100, 200, 400, 800]);
    c.close();
  });

  test("a missing root file is a config error carrying the read error as cause", async () => {
    const c = client({ rootCertPath: join(dir, "nope.pem") });
    const e = await failure(c);
    expect(e.kind).toBe("config");
    expect((e.cause as NodeJS.ErrnoException).code).toBe("ENOENT");
    c.close();
  });
});

describe("IstioCaClient: the connection", () => {
  test("plaintext (tls false) reaches a plaintext CA", async () => {
    const c = client({ address: plain.address, tls: false, rootCertPath: undefined, serverName: undefined });
    expect((await c.sign(csr, 60)).length).toBe(2);
    expect(plain.requests.length).toBe(1);
    c.close();
  });

  test("a SYSTEM or absent root is not read as a file: the fake's private root is untrusted, a handshake failure", async () => {
    for (const rootCertPath of ["SYSTEM", undefined]) {
      const c = client({ rootCertPath });
      const e = await failure(c);
      expect(e.kind).toBe("unavailable");
      expect(e.message.startsWith(`CA ${ca.address}: CSR failed: UNAVAILABLE: `)).toBe(true);
      expect(ca.requests.length).toBe(0);
      c.close();
    }
  });

  test("the channel is kept between CSRs: a root file changed after success is not re-read", async () => {
    const c = client();
    await c.sign(csr, 60);
    writeFileSync(join(dir, "root.pem"), await Bun.file(join(dir, "other-root.pem")).text());
    expect((await c.sign(csr, 60)).length).toBe(2);
    expect(ca.requests.length).toBe(2);
    // close() drops it: the next CSR reads the (now wrong) root and fails the handshake
    c.close();
    const e = await failure(c);
    expect(e.kind).toBe("unavailable");
    expect(ca.requests.length).toBe(2);
    c.close();
  });

  test("after a failed attempt the channel is rebuilt, picking up a fixed root", async () => {
    writeFileSync(join(dir, "root.pem"), await Bun.file(join(dir, "other-root.pem")).text());
    const c = client(
      {},
      {
        sleep: async (ms) => {
          sleeps.push(ms);
          writeFileSync(join(dir, "root.pem"), ca.tls!.rootPem);
          return true;
        },
      },
    );
    expect((await c.sign(csr, 60)).length).toBe(2);
    expect(sleeps).toEqual([100]);
    c.close();
  });
});

// A CA that records the :authority of each call and, when `mtls`, requires a client certificate
// issued by `clientRoot` (PROV_CERT), to see what the client sends on the wire.
async function miniCa(mtls: boolean, clientRoot: LocalCa): Promise<{ address: string; hosts: string[]; rootPem: string; close: () => void }> {
  const tls = await servingCert();
  const signer = await LocalCa.generate();
  const server = new grpc.Server();
  const hosts: string[] = [];
  server.addService(caServiceDefinition(caCodec()), {
    CreateCertificate: (call: grpc.ServerUnaryCall<CertificateRequest, CertificateResponse>, cb: grpc.sendUnaryData<CertificateResponse>) => {
      hosts.push(call.getHost());
      void signer.sign(call.request.csr, 60).then((certChain) => cb(null, { certChain }));
    },
  });
  const creds = grpc.ServerCredentials.createSsl(
    mtls ? Buffer.from(clientRoot.rootPem) : null,
    [{ private_key: Buffer.from(tls.keyPem), cert_chain: Buffer.from(tls.certPem) }],
    mtls,
  );
  const port = await new Promise<number>((res, rej) => server.bindAsync("127.0.0.1:0", creds, (e, p) => (e ? rej(e) : res(p))));
  return { address: `127.0.0.1:${port}`, hosts, rootPem: tls.rootPem, close: () => server.forceShutdown() };
}

describe("IstioCaClient: what goes on the wire", () => {
  let provCa: LocalCa;
  beforeAll(async () => {
    provCa = await LocalCa.generate();
    const k = await generateKeyAndCsr({ algorithm: "ECDSA", rsaKeySize: 2048, curve: "P256", pkcs8: false }, SPIFFE);
    writeFileSync(join(dir, "prov-key.pem"), k.keyPem);
    writeFileSync(join(dir, "prov-cert.pem"), (await provCa.sign(k.csrPem, 3600)).join(""));
  });

  test("a hostname server name is sent as :authority; without one the address is", async () => {
    const m = await miniCa(false, provCa);
    writeFileSync(join(dir, "mini-root.pem"), m.rootPem);
    const port = m.address.split(":")[1];
    const named = client({ address: `localhost:${port}`, rootCertPath: join(dir, "mini-root.pem") });
    expect((await named.sign(csr, 60)).length).toBe(2);
    named.close();
    const unnamed = client({ address: `localhost:${port}`, rootCertPath: join(dir, "mini-root.pem"), serverName: undefined });
    expect((await unnamed.sign(csr, 60)).length).toBe(2);
    unnamed.close();
    expect(m.hosts).toEqual(["istiod.istio-system.svc", `localhost:${port}`]);
    m.close();
  });

  test("the client certificate is presented when both files exist, and only then", async () => {
    const m = await miniCa(true, provCa);
    writeFileSync(join(dir, "mini-root.pem"), m.rootPem);
    const base = { address: m.address, rootCertPath: join(dir, "mini-root.pem") };
    const withCert = client({ ...base, clientCertPath: join(dir, "prov-cert.pem"), clientKeyPath: join(dir, "prov-key.pem") });
    expect((await withCert.sign(csr, 60)).length).toBe(2);
    withCert.close();
    const without = client(base);
    expect((await failure(without)).kind).toBe("unavailable");
    without.close();
    expect(m.hosts.length).toBe(1);
    m.close();
  });

  test("a client certificate or key path that is unset or missing is skipped, not read", async () => {
    const cert = join(dir, "prov-cert.pem");
    const key = join(dir, "prov-key.pem");
    const gone = join(dir, "absent.pem");
    for (const [clientCertPath, clientKeyPath] of [
      [gone, key],
      [cert, gone],
      [cert, undefined],
      [undefined, key],
    ]) {
      const c = client({ clientCertPath, clientKeyPath });
      expect((await c.sign(csr, 60)).length).toBe(2);
      c.close();
    }
    expect(ca.requests.length).toBe(4);
  });
});
