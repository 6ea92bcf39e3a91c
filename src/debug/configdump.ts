// `/debug/config_dump` on the status port: the agent's own state in one JSON document, built on the
// main thread only when asked (this module is imported on the first request). It reads the
// components through their read-only snapshot methods and chooses every field it writes: no
// private key, token or PEM block is ever copied in (certificates appear as their parsed public
// facts), and ProxyConfig and node metadata go through the same redaction as the start-up log.
// The field names are a contract (docs/status.md lists them); `schema` changes if one changes.

import { X509Certificate } from "node:crypto";
import type { AgentConfig } from "../config/agentconfig.ts";
import { redact } from "../config/redact.ts";
import type { Level } from "../lib/log.ts";
import type { BlockerState, Readiness } from "../lib/readiness.ts";
import type { SecretCacheSnapshot } from "../sds/cache.ts";
import type { SecretManagerOptions } from "../sds/options.ts";
import type { XdsSnapshot } from "../xds/proxy.ts";
import type { WasmCacheSnapshot } from "../wasm/factory.ts";
import type { EnvoySupervisor } from "../envoy/supervisor.ts";
import type { ReadinessHistory } from "./history.ts";

export const CONFIG_DUMP_SCHEMA = "agent.config_dump/v1";

/** Where the dump reads from: the composition root hands these over (each absent when that part is off). */
export interface DumpSources {
  config: AgentConfig;
  /** Wall-clock milliseconds. */
  now(): number;
  /** When the process started (wall-clock ms). */
  startedMs: number;
  pid: number;
  readiness: Readiness;
  history: ReadinessHistory;
  logLevels(): Record<string, Level>;
  signer?: SecretManagerOptions["signer"];
  secrets?(): SecretCacheSnapshot | undefined;
  xds?(): XdsSnapshot;
  dns?(): { hosts: number; updates: number; lastUpdateMs?: number };
  wasm?(): WasmCacheSnapshot;
  envoy?(): ReturnType<EnvoySupervisor["snapshot"]>;
}

export type CertificateState = "warming" | "valid" | "renewing" | "expired";

export interface CertificateView {
  resource: string;
  source: string;
  state: CertificateState;
  spiffeIds: string[];
  subject: string;
  issuer: string;
  serial: string;
  notBefore: string;
  notAfter: string;
  expiresInSeconds: number;
  chainLength: number;
}

const iso = (ms: number | undefined): string | undefined => (ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString());

/** The public facts of one PEM certificate (undefined when it does not parse). */
function parsePem(pem: string): X509Certificate | undefined {
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

function pemBlocks(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
}

function certFacts(pem: string, now: number): Omit<CertificateView, "resource" | "source" | "state" | "chainLength"> | undefined {
  const c = parsePem(pem);
  if (!c) return undefined;
  const notAfter = Date.parse(c.validTo);
  const spiffeIds = (c.subjectAltName ?? "")
    .split(/,\s*/)
    .filter((s) => s.startsWith("URI:"))
    .map((s) => s.slice(4));
  return {
    spiffeIds,
    // An Istio workload certificate has an empty subject (its identity is the URI SAN).
    subject: (c.subject ?? "").replace(/\n/g, ", "),
    issuer: (c.issuer ?? "").replace(/\n/g, ", "),
    serial: (c.serialNumber ?? "").toLowerCase(),
    notBefore: new Date(Date.parse(c.validFrom)).toISOString(),
    notAfter: new Date(notAfter).toISOString(),
    // Rounded down: time left is never overstated (23h59m59.6s is not a day).
    expiresInSeconds: Math.floor((notAfter - now) / 1000),
  };
}

/** Expired once its notAfter has passed (not when less than a whole second is left). */
function expired(facts: { notAfter: string }, now: number): boolean {
  return Date.parse(facts.notAfter) <= now;
}

function chainView(resource: string, source: string, chainPem: string, now: number, renewing: boolean): CertificateView | undefined {
  const blocks = pemBlocks(chainPem);
  const facts = blocks[0] ? certFacts(blocks[0], now) : undefined;
  if (!facts) return undefined;
  const state: CertificateState = expired(facts, now) ? "expired" : renewing ? "renewing" : "valid";
  return { resource, source, state, chainLength: blocks.length, ...facts };
}

function rootViews(resource: string, source: string, bundle: string, now: number): CertificateView[] {
  return pemBlocks(bundle).flatMap((pem) => {
    const facts = certFacts(pem, now);
    return facts ? [{ resource, source, state: expired(facts, now) ? ("expired" as const) : ("valid" as const), chainLength: 1, ...facts }] : [];
  });
}

/** Every certificate the agent holds or serves, with its state; never a key. */
export function certificatesView(s: SecretCacheSnapshot | undefined, signerKind: string | undefined, now: number) {
  const certificates: CertificateView[] = [];
  const lastError = s?.lastError ? { message: s.lastError.message, at: iso(s.lastError.atMs) } : undefined;
  if (s?.workload) {
    const renewing = s.renewFailures > 0 || s.signing;
    const v = chainView("default", `ca:${s.signer ?? signerKind ?? "unknown"}`, s.workload.chainPem, now, renewing);
    if (v) certificates.push(v);
  }
  for (const f of s?.files ?? []) {
    if (f.chainPem) {
      const v = chainView(f.name, `files:${f.paths[0] ?? ""}`, f.chainPem, now, false);
      if (v) certificates.push(v);
    }
    if (f.rootPem) certificates.push(...rootViews(f.name, `files:${f.paths[f.paths.length - 1] ?? ""}`, f.rootPem, now));
  }
  if (s?.rootPem && !(s.files ?? []).some((f) => f.name === "ROOTCA")) certificates.push(...rootViews("ROOTCA", "ca", s.rootPem, now));
  const hasWorkload = certificates.some((c) => c.resource === "default");
  return {
    spiffeId: s?.spiffeId ?? "",
    /** `warming` until the first workload certificate is in the cache. */
    workloadState: hasWorkload ? certificates.find((c) => c.resource === "default")!.state : ("warming" as CertificateState),
    renewFailures: s?.renewFailures ?? 0,
    ...(lastError ? { lastCaError: lastError } : {}),
    certificates,
  };
}

function conditionView(s: BlockerState, now: number) {
  return {
    name: s.name,
    since: iso(s.since),
    pendingSeconds: Math.max(0, Math.round((now - s.since) / 100) / 10),
    ...(s.lastError ? { lastError: s.lastError } : {}),
  };
}

/** A URL as shown to the operator: any user:password part removed. */
export function safeUrl(u: string): string {
  try {
    const url = new URL(u);
    if (url.username || url.password) {
      url.username = "";
      url.password = "";
    }
    return url.toString();
  } catch {
    return u.replace(/\/\/[^/@]*@/, "//");
  }
}

/** Node metadata as Istio builds it from ISTIO_META_* (prefix removed), redacted. */
function nodeMetadata(cfg: AgentConfig): Record<string, unknown> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(cfg.rawEnv)) {
    if (k.startsWith("ISTIO_META_") && typeof v === "string") out[k.slice("ISTIO_META_".length)] = v;
  }
  const sorted: Record<string, string> = {};
  for (const k of Object.keys(out).sort()) sorted[k] = out[k]!;
  return redact(sorted);
}

function proxyConfigView(cfg: AgentConfig): Record<string, { value: unknown; source: string }> {
  const pc = redact(cfg.proxyConfig as Record<string, unknown>);
  const out: Record<string, { value: unknown; source: string }> = {};
  for (const k of Object.keys(pc).sort()) {
    if (pc[k] === undefined) continue;
    out[k] = { value: pc[k], source: cfg.proxyConfigSources[k] ?? "default" };
  }
  return out;
}

function xdsView(x: XdsSnapshot | undefined) {
  if (!x) return { enabled: false };
  const u = x.upstream;
  return {
    enabled: true,
    upstream: {
      address: u.address,
      state: u.state,
      ...(u.sinceMs !== undefined ? { since: iso(u.sinceMs) } : {}),
      ...(u.lastError ? { lastError: { message: u.lastError.message, code: u.lastError.code, at: iso(u.lastError.atMs) } } : {}),
    },
    streamsOpened: x.streamsOpened,
    ...(x.stream
      ? {
          stream: {
            active: x.stream.active,
            delta: x.stream.delta,
            opened: iso(x.stream.openedMs),
            otherTypes: x.stream.otherTypes,
            types: x.stream.types
              .map((t) => ({
                typeUrl: t.typeUrl,
                requests: t.requests,
                requestBytes: t.requestBytes,
                responses: t.responses,
                responseBytes: t.responseBytes,
                ...(t.lastVersion !== undefined ? { lastVersion: t.lastVersion } : {}),
                ...(t.lastNonce !== undefined ? { lastNonce: t.lastNonce } : {}),
                ...(t.lastAck ? { lastAck: t.lastAck } : {}),
                ...(t.lastNack ? { lastNack: { nonce: t.lastNack.nonce, reason: t.lastNack.reason, code: t.lastNack.code, at: iso(t.lastNack.atMs) } } : {}),
                ...(t.lastResponseMs !== undefined ? { lastResponse: iso(t.lastResponseMs) } : {}),
              }))
              .sort((a, b) => a.typeUrl.localeCompare(b.typeUrl)),
          },
        }
      : {}),
  };
}

function caView(signer: SecretManagerOptions["signer"] | undefined) {
  if (!signer) return { provider: "none" };
  switch (signer.kind) {
    case "istiod":
      return { provider: "istiod", address: signer.ca.address, tls: signer.ca.tls, tokenPath: signer.tokenPath };
    case "local":
      return { provider: "local", ...(signer.dir ? { dir: signer.dir } : {}) };
    case "none":
      return { provider: "none", why: signer.why };
  }
}

/** The whole document. */
export function buildConfigDump(src: DumpSources) {
  const now = src.now();
  const cfg = src.config;
  const blockers = src.readiness.blockers();
  const warnings = src.readiness.warnings();
  const envoy = src.envoy?.();
  const dns = src.dns?.();
  const wasm = src.wasm?.();
  const history = src.history.snapshot();
  return {
    schema: CONFIG_DUMP_SCHEMA,
    generated: iso(now),
    agent: {
      version: cfg.version,
      proxyType: cfg.proxyType,
      pid: src.pid,
      started: iso(src.startedMs),
      uptimeSeconds: Math.max(0, Math.round((now - src.startedMs) / 1000)),
      logLevels: src.logLevels(),
    },
    node: {
      id: cfg.node.nodeId,
      type: cfg.node.type,
      ips: [...cfg.node.ips],
      ipMode: cfg.node.ipMode,
      domain: cfg.node.domain,
      podName: cfg.node.podName,
      podNamespace: cfg.node.podNamespace,
      serviceAccount: cfg.node.serviceAccount,
      clusterId: cfg.env.ISTIO_META_CLUSTER_ID || "Kubernetes",
      labels: redact({ ...cfg.labels }),
      metadata: nodeMetadata(cfg),
    },
    proxyConfig: proxyConfigView(cfg),
    ca: caView(src.signer),
    identity: certificatesView(src.secrets?.(), src.signer?.kind, now),
    xds: xdsView(src.xds?.()),
    dns: dns
      ? { enabled: true, hosts: dns.hosts, updates: dns.updates, ...(dns.lastUpdateMs !== undefined ? { lastUpdate: iso(dns.lastUpdateMs) } : {}) }
      : { enabled: false },
    wasm: wasm
      ? {
          enabled: true,
          dir: wasm.dir,
          loaded: wasm.loaded,
          modules: wasm.modules.map((m) => ({ ...m, urls: m.urls.map(safeUrl), idleSeconds: Math.round(m.idleSeconds) })),
        }
      : { enabled: false },
    readiness: {
      ready: blockers.length === 0,
      blockers: blockers.map((b) => conditionView(b, now)),
      warnings: warnings.map((w) => conditionView(w, now)),
      history: history.events.map((e) => ({ at: iso(e.atMs), name: e.name, event: e.event, gates: e.gates, ...(e.error ? { error: e.error } : {}) })),
      historyDropped: history.dropped,
    },
    envoy: envoy
      ? {
          enabled: true,
          state: envoy.state,
          pids: envoy.pids,
          epoch: envoy.epoch,
          restarts: envoy.restarts,
          restartPolicy: envoy.restartPolicy,
          ...(envoy.lastExit ? { lastExit: envoy.lastExit } : {}),
          drainPlan: envoy.drainPlan,
        }
      : { enabled: false },
  };
}

export type ConfigDump = ReturnType<typeof buildConfigDump>;
