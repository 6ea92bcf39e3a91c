// Shared setup for xDS proxy tests: a temp root with a test PKI and token, a fake istiod over TLS,
// the proxy built by the production factory from an AgentConfig, and a grpc-js client standing in
// for Envoy on the XDS socket.

import * as grpc from "@grpc/grpc-js";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentConfig } from "../../src/config/agentconfig.ts";
import type { ProxyConfig } from "../../src/config/proxyconfig.ts";
import type { NameTableSink, TrustBundleSink } from "../../src/lib/interfaces.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { newRegistry, type Registry } from "../../src/lib/metrics.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { createXdsProxy, type XdsProxy } from "../../src/xds/proxy.ts";
import { testConfig as loadedConfig } from "../support/config.ts";
import { ADS_SERVICE_DEF, FakeIstiod, discoveryTypes, makeTestPki, type TestPki } from "../support/fake-istiod.ts";

export const TYPES = discoveryTypes();

/** An AgentConfig through the real loader (test/support/config.ts): `pc` goes in as PROXY_CONFIG. */
export function testConfig(root: string, env: Record<string, string>, pc: Partial<ProxyConfig>): AgentConfig {
  return loadedConfig({ env: { ...env, PROXY_CONFIG: JSON.stringify(pc) }, root, uid: process.getuid?.() ?? 0 });
}

export class RecordingSinks implements NameTableSink, TrustBundleSink {
  tables: Uint8Array[] = [];
  bundles: string[][] = [];
  rejectNext = false;
  updateNameTable(r: Uint8Array): void {
    if (this.rejectNext) {
      this.rejectNext = false;
      throw new Error("bad name table");
    }
    this.tables.push(r);
  }
  updateTrustBundle(p: string[]): void {
    this.bundles.push(p);
  }
}

export interface Harness {
  root: string;
  pki: TestPki;
  istiod: FakeIstiod;
  proxy: XdsProxy;
  registry: Registry;
  readiness: Readiness;
  sinks: RecordingSinks;
  lines: string[];
  stop(): Promise<void>;
}

export async function startHarness(
  opts: {
    env?: Record<string, string>;
    pc?: Partial<ProxyConfig>;
    dns?: boolean;
    token?: string | null;
    tls?: boolean;
    requireClientCert?: boolean;
    sans?: string[];
  } = {},
): Promise<Harness> {
  const root = mkdtempSync(join(tmpdir(), "xds-test-"));
  const pki = makeTestPki(join(root, "pki"), opts.sans ?? []);
  const tls = opts.tls ?? true;
  const istiod = await new FakeIstiod({ pki: tls ? pki : undefined, requireClientCert: opts.requireClientCert }).start();
  mkdirSync(join(root, "var/run/secrets/istio"), { recursive: true });
  copyFileSync(pki.caCert, join(root, "var/run/secrets/istio/root-cert.pem"));
  if (opts.token !== null) {
    mkdirSync(join(root, "var/run/secrets/tokens"), { recursive: true });
    writeFileSync(join(root, "var/run/secrets/tokens/istio-token"), `${opts.token ?? "test-token"}\n`);
  }
  const cfg = testConfig(
    root,
    { ISTIOD_SAN: "istiod.istio-system.svc", ISTIO_META_CLUSTER_ID: "Kubernetes", ...(opts.env ?? {}) },
    { discoveryAddress: istiod.address, controlPlaneAuthPolicy: tls ? "MUTUAL_TLS" : "NONE", ...(opts.pc ?? {}) },
  );
  const { sink, lines } = memoryLogger("all:debug");
  const registry = newRegistry();
  const readiness = new Readiness();
  const sinks = new RecordingSinks();
  const proxy = createXdsProxy(cfg, { log: sink.logger(), registry, readiness, nameTables: sinks, trustBundles: sinks, dnsEnabled: opts.dns ?? true });
  const ac = new AbortController();
  await proxy.start(ac.signal);
  return {
    root,
    pki,
    istiod,
    proxy,
    registry,
    readiness,
    sinks,
    lines,
    async stop() {
      ac.abort();
      await proxy.stopped();
      await istiod.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export async function metricValue(reg: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = reg.getSingleMetric(name);
  if (!m) return 0;
  const v = (await m.get()).values.find((x) => Object.entries(labels).every(([k, val]) => x.labels[k] === val));
  return v?.value ?? 0;
}

/** A grpc-js client on the XDS socket, standing in for Envoy; identity (de)serializers. */
export class EnvoyClient {
  private client: grpc.Client;
  call: grpc.ClientDuplexStream<Buffer, Buffer>;
  readonly received: Buffer[] = [];
  readonly status: Promise<grpc.StatusObject>;
  private waiters: (() => void)[] = [];

  constructor(
    socketPath: string,
    readonly delta = false,
  ) {
    const Ctor = grpc.makeGenericClientConstructor(ADS_SERVICE_DEF as unknown as grpc.ServiceDefinition, "ads");
    this.client = new Ctor(`unix://${socketPath}`, grpc.credentials.createInsecure(), { "grpc.max_receive_message_length": -1 });
    const c = this.client as unknown as Record<string, () => grpc.ClientDuplexStream<Buffer, Buffer>>;
    this.call = delta ? c.DeltaAggregatedResources!.call(this.client) : c.StreamAggregatedResources!.call(this.client);
    this.call.on("data", (b: Buffer) => {
      this.received.push(b);
      for (const w of this.waiters.splice(0)) w();
    });
    this.call.on("error", () => {});
    this.status = new Promise((r) => this.call.on("status", r));
  }

  send(msg: Record<string, unknown>): Buffer {
    const T = this.delta ? TYPES.DeltaReq : TYPES.Req;
    const b = Buffer.from(T.encode(T.create(msg)).finish());
    this.call.write(b);
    return b;
  }

  async waitFor(n: number, timeoutMs = 5000): Promise<Buffer[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.received.length < n) {
      if (Date.now() > deadline) throw new Error(`Envoy client: ${this.received.length} of ${n} responses within ${timeoutMs} ms`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, 50);
        this.waiters.push(() => (clearTimeout(t), r()));
      });
    }
    return this.received;
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

/** The version_info of an encoded DiscoveryResponse, read with Envoy's own protos. */
export function versionOf(b: Buffer): string {
  return (TYPES.Res.toObject(TYPES.Res.decode(b)) as { versionInfo?: string }).versionInfo ?? "";
}

export const LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";
export const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/**
 * Per-file test scope: the current harness, Envoy clients opened through `client()`, and an
 * afterEach that closes them and stops the harness.
 */
export function harnessScope(afterEach: (fn: () => Promise<void>) => void): { get h(): Harness; set h(v: Harness); client(delta?: boolean): EnvoyClient } {
  let current: Harness | undefined;
  const clients: EnvoyClient[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await current?.stop();
    current = undefined;
  });
  return {
    get h() {
      return current!;
    },
    set h(v: Harness) {
      current = v;
    },
    client(delta = false) {
      const c = new EnvoyClient(current!.proxy.socketPath, delta);
      clients.push(c);
      return c;
    },
  };
}
