// A fake istiod for tests: a real grpc-js server (TLS with a test CA made by the openssl CLI, or
// plaintext) serving AggregatedDiscoveryService SotW and Delta. Each stream is scriptable message
// by message (send/sendRaw/end) and records its requests and metadata. `serve()` turns it into a
// tiny SotW server answering each requested type from a resource table.

import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { selfSignedCert } from "./self-signed.ts";

const PROTO_DIR = join(import.meta.dir, "../../proto");

export interface TestPki {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/** A CA plus a server cert for `istiod.istio-system.svc` (and `sans`) and a client cert. */
export function makeTestPki(dir: string, sans: string[] = []): TestPki {
  mkdirSync(dir, { recursive: true });
  const p = (f: string) => join(dir, f);
  if (Bun.which("openssl") === null) throw new Error("makeTestPki: the openssl CLI is needed to make the test PKI (apt-get install openssl)");
  const ossl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const ca = selfSignedCert("/O=test/CN=test-root", 2, ["basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign"]);
  writeFileSync(p("ca-key.pem"), ca.key);
  writeFileSync(p("ca.pem"), ca.cert);
  const leaf = (name: string, ext: string) => {
    ossl(
      "req",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      p(`${name}-key.pem`),
      "-out",
      p(`${name}.csr`),
      "-subj",
      `/O=test/CN=${name}`,
    );
    writeFileSync(p(`${name}.ext`), ext);
    ossl(
      "x509",
      "-req",
      "-in",
      p(`${name}.csr`),
      "-CA",
      p("ca.pem"),
      "-CAkey",
      p("ca-key.pem"),
      "-CAcreateserial",
      "-out",
      p(`${name}.pem`),
      "-days",
      "2",
      "-extfile",
      p(`${name}.ext`),
    );
  };
  const dns = ["istiod.istio-system.svc", ...sans].map((s) => (/^[\d.]+$/.test(s) ? `IP:${s}` : `DNS:${s}`)).join(",");
  leaf("server", `subjectAltName=${dns}\nextendedKeyUsage=serverAuth\n`);
  leaf("client", `subjectAltName=URI:spiffe://cluster.local/ns/default/sa/test\nextendedKeyUsage=clientAuth\n`);
  return { dir, caCert: p("ca.pem"), serverCert: p("server.pem"), serverKey: p("server-key.pem"), clientCert: p("client.pem"), clientKey: p("client-key.pem") };
}

export interface AnyResource {
  typeUrl: string;
  value: Uint8Array;
  /** Delta: resource name (defaults to an index). */
  name?: string;
}

export interface FakeResponse {
  typeUrl: string;
  versionInfo?: string;
  nonce?: string;
  resources: AnyResource[];
}

/** protobufjs types for the discovery messages, from our own proto files. */
export function discoveryTypes() {
  const root = new protobuf.Root();
  protobuf.parse(readFileSync(join(PROTO_DIR, "xds-any.proto"), "utf8"), root, { keepCase: false });
  protobuf.parse(readFileSync(join(PROTO_DIR, "xds-rpc-status.proto"), "utf8"), root, { keepCase: false });
  protobuf.parse(readFileSync(join(PROTO_DIR, "discovery.proto"), "utf8"), root, { keepCase: false });
  root.resolveAll();
  const t = (n: string) => root.lookupType(`envoy.service.discovery.v3.${n}`);
  return { Req: t("DiscoveryRequest"), DeltaReq: t("DeltaDiscoveryRequest"), Res: t("DiscoveryResponse"), DeltaRes: t("DeltaDiscoveryResponse") };
}

export type DecodedRequest = {
  typeUrl: string;
  versionInfo?: string;
  responseNonce?: string;
  resourceNames?: string[];
  resourceNamesSubscribe?: string[];
  errorDetail?: { code?: number; message?: string };
  raw: Buffer;
};

const id = (b: Buffer) => b;
const method = (name: string) => ({
  path: `/envoy.service.discovery.v3.AggregatedDiscoveryService/${name}`,
  requestStream: true,
  responseStream: true,
  requestSerialize: id,
  requestDeserialize: id,
  responseSerialize: id,
  responseDeserialize: id,
});
export const ADS_SERVICE_DEF = { StreamAggregatedResources: method("StreamAggregatedResources"), DeltaAggregatedResources: method("DeltaAggregatedResources") };

export class FakeStream {
  readonly requests: DecodedRequest[] = [];
  readonly metadata: Record<string, string>;
  /** The client certificate the TLS peer presented (DER), if any. */
  readonly peerCertDer: Buffer | undefined;
  readonly closed: Promise<void>;
  private waiters: { pred: (r: DecodedRequest) => boolean; resolve: (r: DecodedRequest) => void; from: number }[] = [];
  private nonce = 0;
  ended = false;
  /** Requests that did not decode as a (Delta)DiscoveryRequest. */
  undecodable = 0;

  constructor(
    readonly call: grpc.ServerDuplexStream<Buffer, Buffer>,
    readonly delta: boolean,
    private readonly types: ReturnType<typeof discoveryTypes>,
  ) {
    this.metadata = Object.fromEntries(Object.entries(call.metadata.getMap()).map(([k, v]) => [k, String(v)]));
    const peer = call.getAuthContext?.()?.sslPeerCertificate;
    this.peerCertDer = peer?.raw && peer.raw.length > 0 ? Buffer.from(peer.raw) : undefined;
    this.closed = new Promise((r) => {
      call.on("close", () => r());
      call.on("cancelled", () => r());
      call.on("error", () => r());
      call.on("end", () => r());
    });
    call.on("error", () => {});
    call.on("data", (raw: Buffer) => {
      const T = delta ? types.DeltaReq : types.Req;
      let decoded: object;
      try {
        decoded = T.toObject(T.decode(raw), { defaults: false }) as object;
      } catch {
        this.undecodable++; // the agent relays request bytes it only scans; fuzz tests send garbage
        return;
      }
      const r = { ...decoded, raw } as DecodedRequest;
      r.typeUrl ??= "";
      this.requests.push(r);
      const idx = this.requests.length - 1;
      this.waiters = this.waiters.filter((w) => {
        if (idx >= w.from && w.pred(r)) {
          w.resolve(r);
          return false;
        }
        return true;
      });
    });
  }

  /** The next request (after those already returned by earlier calls with the same cursor) matching `pred`. */
  nextRequest(pred: (r: DecodedRequest) => boolean = () => true, from = 0, timeoutMs = 5000): Promise<DecodedRequest> {
    const found = this.requests.slice(from).find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const t = setTimeout(
        () => reject(new Error(`fake istiod: no matching request within ${timeoutMs} ms; got ${this.requests.map((r) => r.typeUrl).join(", ")}`)),
        timeoutMs,
      );
      this.waiters.push({ pred, from, resolve: (r) => (clearTimeout(t), resolve(r)) });
    });
  }

  encode(r: FakeResponse): Buffer {
    const nonce = r.nonce ?? `n${++this.nonce}`;
    if (this.delta) {
      const m = this.types.DeltaRes.create({
        systemVersionInfo: r.versionInfo ?? "",
        typeUrl: r.typeUrl,
        nonce,
        resources: r.resources.map((a, i) => ({ name: a.name ?? `r${i}`, version: r.versionInfo ?? "1", resource: { typeUrl: a.typeUrl, value: a.value } })),
      });
      return Buffer.from(this.types.DeltaRes.encode(m).finish());
    }
    const m = this.types.Res.create({
      versionInfo: r.versionInfo ?? "",
      typeUrl: r.typeUrl,
      nonce,
      resources: r.resources.map((a) => ({ typeUrl: a.typeUrl, value: a.value })),
    });
    return Buffer.from(this.types.Res.encode(m).finish());
  }

  send(r: FakeResponse): boolean {
    return this.sendRaw(this.encode(r));
  }

  sendRaw(bytes: Buffer): boolean {
    return this.call.write(bytes);
  }

  /** End the stream with a status (OK = normal end). */
  end(code: grpc.status = grpc.status.OK, details = ""): void {
    this.ended = true;
    if (code === grpc.status.OK) this.call.end();
    else this.call.emit("error", { code, details, metadata: new grpc.Metadata() } as grpc.ServiceError);
  }
}

export interface FakeIstiodOptions {
  pki?: TestPki;
  /** Require and check a client certificate. */
  requireClientCert?: boolean;
  host?: string;
}

export class FakeIstiod {
  readonly streams: FakeStream[] = [];
  port = 0;
  private server = new grpc.Server({ "grpc.max_send_message_length": -1, "grpc.max_receive_message_length": -1 });
  private streamWaiters: (() => boolean)[] = [];
  private readonly types = discoveryTypes();
  /** When set, every new stream is handed to this (e.g. `serve`). */
  onStream?: (s: FakeStream) => void;

  constructor(private readonly opts: FakeIstiodOptions = {}) {
    const accept = (delta: boolean) => (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      const s = new FakeStream(call, delta, this.types);
      this.streams.push(s);
      this.onStream?.(s);
      this.streamWaiters = this.streamWaiters.filter((w) => !w());
    };
    this.server.addService(ADS_SERVICE_DEF as unknown as grpc.ServiceDefinition, {
      StreamAggregatedResources: accept(false),
      DeltaAggregatedResources: accept(true),
    });
  }

  get address(): string {
    return `${this.opts.host ?? "127.0.0.1"}:${this.port}`;
  }

  async start(): Promise<this> {
    const pki = this.opts.pki;
    const creds = pki
      ? grpc.ServerCredentials.createSsl(
          readFileSync(pki.caCert),
          [{ private_key: readFileSync(pki.serverKey), cert_chain: readFileSync(pki.serverCert) }],
          this.opts.requireClientCert ?? false,
        )
      : grpc.ServerCredentials.createInsecure();
    this.port = await new Promise<number>((res, rej) => this.server.bindAsync(`${this.opts.host ?? "127.0.0.1"}:0`, creds, (e, p) => (e ? rej(e) : res(p))));
    return this;
  }

  /** The next stream not yet taken by an earlier call. */
  nextStream(timeoutMs = 5000): Promise<FakeStream> {
    const taken = this.taken++;
    return new Promise((resolve, reject) => {
      const check = () => {
        const s = this.streams[taken];
        if (!s) return false;
        clearTimeout(t);
        resolve(s);
        return true;
      };
      const t = setTimeout(() => reject(new Error(`fake istiod: no stream #${taken + 1} within ${timeoutMs} ms`)), timeoutMs);
      if (!check()) this.streamWaiters.push(check);
    });
  }
  private taken = 0;

  async stop(): Promise<void> {
    this.server.forceShutdown();
  }
}

/** Answer each SotW request type from `table` (type URL -> resources) once per new version. */
export function serve(s: FakeStream, table: Map<string, AnyResource[]>, version = "1"): void {
  const sent = new Set<string>();
  s.call.on("data", () => {
    const r = s.requests[s.requests.length - 1]!;
    if (r.errorDetail || sent.has(r.typeUrl)) return;
    const res = table.get(r.typeUrl);
    if (!res) return;
    sent.add(r.typeUrl);
    s.send({ typeUrl: r.typeUrl, versionInfo: version, resources: res });
  });
}
