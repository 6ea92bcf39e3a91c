// A pod in a fake mesh: fake istiod (TLS, behind a TCP relay so it can be "restarted" on the same
// address, serving a LiveXds table), fake CA (TLS, token-checked), the e2e Envoy stand-in
// (xds-envoy.ts, through a launcher script), and the compiled agent
// started with the injector's env, the mesh root at ./var/run/secrets/istio/root-cert.pem and the
// token at ./var/run/secrets/tokens/istio-token.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { FakeCa } from "../support/fake-ca.ts";
import { FakeIstiod, makeTestPki, type AnyResource, type TestPki } from "../support/fake-istiod.ts";
import { LiveXds } from "./live-xds.ts";
import { envoyRecords, killRecordedEnvoys, startPod, type Pod } from "./pod.ts";
import { writeE2eEnvoyLauncher, type E2eEnvoyRecord } from "./xds-envoy.ts";

export const TOKEN = "e2e-istio-token";
export const SPIFFE = "spiffe://cluster.local/ns/demo/sa/greeter-client";

/** A TCP relay on 127.0.0.1:<port> to a target that can change; `cut()` drops every connection. */
export class Relay {
  private readonly sockets = new Set<Socket>();
  private server!: Server;
  private pendingCut: { left: number; done: () => void } | undefined;
  port = 0;
  /** Runs when a client's connection arrives, before the hop dials the target. */
  onConnect: (() => void) | undefined;
  constructor(public targetPort: number) {}
  async start(): Promise<this> {
    this.server = createServer((down) => {
      this.onConnect?.();
      const up = createConnection({ host: "127.0.0.1", port: this.targetPort });
      for (const s of [down, up]) {
        this.sockets.add(s);
        s.on("error", () => {});
        s.on("close", () => (this.sockets.delete(s), down.destroy(), up.destroy()));
      }
      up.on("data", (chunk: Buffer) => {
        const p = this.pendingCut;
        if (!p || (p.left -= chunk.length) > 0) return;
        this.pendingCut = undefined;
        this.cut();
        p.done();
      });
      down.pipe(up).pipe(down);
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", () => r()));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }
  cut(): void {
    for (const s of this.sockets) s.destroy();
  }
  /** Drop every connection once `bytes` more have come from the target toward the client (istiod's side mid-message); resolves when cut. */
  cutAfterBytes(bytes: number): Promise<void> {
    return new Promise((done) => (this.pendingCut = { left: bytes, done }));
  }
  close(): void {
    this.cut();
    this.server.close();
  }
}

export interface Mesh {
  pod: Pod;
  istiod: FakeIstiod;
  /** What istiod serves: `xds.setTable(t)` pushes a new config. */
  xds: LiveXds;
  relay: Relay;
  ca: FakeCa;
  pki: TestPki;
  recordFile: string;
  records(): E2eEnvoyRecord[];
  /** Stop istiod and start a new one (serving `table`) behind the same address. */
  restartIstiod(table: Map<string, AnyResource[]>): Promise<void>;
  cleanup(): Promise<void>;
}

export interface MeshOptions {
  env?: Record<string, string>;
  /** Env that needs the fake CA's address (applied last). */
  envFor?: (m: { caAddress: string }) => Record<string, string>;
  proxyConfig?: Record<string, unknown>;
  /** The agent's arguments (default: proxy sidecar). */
  args?: string[];
  /** More files for the pod's root. */
  files?: Record<string, string>;
  /** The bearer token the CA accepts (default TOKEN). */
  caToken?: string;
  /** No Kubernetes token file in the pod. */
  noTokenFile?: boolean;
}

export async function startMesh(table: Map<string, AnyResource[]>, opts: MeshOptions = {}): Promise<Mesh> {
  const work = mkdtempSync(join(tmpdir(), "agent-e2e-mesh-"));
  const pki = makeTestPki(join(work, "pki"));
  const xds = new LiveXds(table);
  let istiod = new FakeIstiod({ pki });
  istiod.onStream = xds.attach;
  await istiod.start();
  const relay = await new Relay(istiod.port).start();
  const ca = await FakeCa.start({ token: opts.caToken ?? TOKEN, spiffeId: SPIFFE });
  const launcher = writeE2eEnvoyLauncher(work);
  const recordFile = join(work, "envoy-record.jsonl");
  const rootBundle = readFileSync(pki.caCert, "utf8") + ca.tls!.rootPem;
  let pod: Pod | undefined;
  try {
    pod = await startPod({
      env: {
        CA_ADDR: ca.address,
        ISTIOD_SAN: "istiod.istio-system.svc",
        FAKE_ENVOY_RECORD: recordFile,
        ...opts.env,
        ...opts.envFor?.({ caAddress: ca.address }),
      },
      ...(opts.args ? { args: opts.args } : {}),
      proxyConfig: {
        discoveryAddress: `127.0.0.1:${relay.port}`,
        binaryPath: launcher,
        terminationDrainDuration: "1s",
        drainDuration: "2s",
        ...opts.proxyConfig,
      },
      files: { "var/run/secrets/istio/root-cert.pem": rootBundle, ...(opts.noTokenFile ? {} : { "var/run/secrets/tokens/istio-token": TOKEN }), ...opts.files },
    });
  } catch (e) {
    relay.close();
    await istiod.stop();
    await ca.close();
    rmSync(work, { recursive: true, force: true });
    throw e;
  }
  const mesh: Mesh = {
    pod,
    get istiod() {
      return istiod;
    },
    xds,
    relay,
    ca,
    pki,
    recordFile,
    records: () => envoyRecords(recordFile),
    async restartIstiod(next) {
      await istiod.stop();
      relay.cut();
      xds.setTable(next);
      istiod = new FakeIstiod({ pki });
      istiod.onStream = xds.attach;
      await istiod.start();
      relay.targetPort = istiod.port;
    },
    async cleanup() {
      pod!.kill();
      killRecordedEnvoys(recordFile);
      relay.close();
      await istiod.stop();
      await ca.close();
      pod!.box.cleanup();
      rmSync(work, { recursive: true, force: true });
    },
  };
  return mesh;
}

const id = (b: Buffer) => b;
const SDS = {
  StreamSecrets: {
    path: "/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets",
    requestStream: true,
    responseStream: true,
    requestSerialize: id,
    requestDeserialize: id,
    responseSerialize: id,
    responseDeserialize: id,
  },
};

/** Ask the agent's SDS socket for `name` once; resolves with the first response's raw bytes. */
export function fetchSecret(socketPath: string, name: string, encodeRequest: (typeUrl: string, names: string[]) => Buffer, timeoutMs = 5000): Promise<Buffer> {
  const Ctor = grpc.makeGenericClientConstructor(SDS as unknown as grpc.ServiceDefinition, "SDS");
  const client = new Ctor(`unix://${socketPath}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Function>;
  return new Promise<Buffer>((resolve, reject) => {
    const call = client.StreamSecrets!({ deadline: Date.now() + timeoutMs }) as grpc.ClientDuplexStream<Buffer, Buffer>;
    const done = (f: () => void) => {
      f();
      call.cancel();
      client.close();
    };
    call.on("data", (b: Buffer) => done(() => resolve(b)));
    call.on("error", (e) => done(() => reject(e)));
    call.write(encodeRequest("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", [name]));
  });
}
