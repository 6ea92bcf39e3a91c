// Small interfaces through which components hand things to each other without importing each
// other. The composition root (src/agent.ts) connects implementations.

/** The DNS proxy consumes NDS name tables received by the xDS relay. */
export interface NameTableSink {
  /** `resource` is a serialized istio.networking.nds.v1.NameTable. Throws on a malformed table (the relay NACKs). */
  updateNameTable(resource: Uint8Array): void;
}

/** The certificate side consumes trust bundles from PCDS (ProxyConfig.caCertificatesPem). */
export interface TrustBundleSink {
  updateTrustBundle(pemCerts: string[]): void;
}

/** Health transitions (VM / WorkloadEntry health) sent upstream through the xDS relay. */
export interface HealthReporter {
  /** `error` undefined = healthy. The relay sends istio.v1.HealthInformation and replays the last one on reconnect. */
  reportHealth(error: string | undefined): void;
}

/** What the status server may ask of the Envoy supervisor (`/quitquitquit`, `/drain`). */
export interface LifecycleControl {
  /** Exit now without draining (POST /quitquitquit). */
  quit(): void;
  /** Drain listeners with skip_exit; a later SIGTERM then exits without waiting (POST /drain). */
  drain(): Promise<void>;
}
