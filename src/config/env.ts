// Every environment variable `agent proxy` reads, declared once: name, type, default, one line of
// doc. Istio's names and defaults (reference §3); variables marked "beyond Istio" are ours.
// `agent proxy --help` and the README table are generated from this list.
// The iptables command declares its own flag-bound variables in src/iptables/.

import { declare as d } from "./envdecl.ts";
// Durations that become timers are capped at MAX_TIMER_MS: a longer one would fire at once.
import { MAX_TIMER_MS } from "../lib/clock.ts";

/**
 * Streams one connection may have open on the agent's gRPC servers, whatever
 * ISTIO_GPRC_MAXSTREAMS says (Istio's 100,000): each open stream holds a few KiB, so 100,000 on
 * one connection held ~450 MiB. Envoy opens one ADS stream and one SDS stream per secret;
 * proxyless gRPC one ADS stream. A larger ISTIO_GPRC_MAXSTREAMS set explicitly is a warning.
 */
export const MAX_STREAMS_PER_CONNECTION = 1000;

export const PROXY_ENV = {
  // Pod identity
  POD_NAME: d("POD_NAME", "string", "", "identity", "Pod name; node ID is <type>~<ip>~POD_NAME.POD_NAMESPACE~<domain>"),
  POD_NAMESPACE: d("POD_NAMESPACE", "string", "", "identity", "Pod namespace"),
  INSTANCE_IP: d("INSTANCE_IP", "string", "", "identity", "Pod IP, listed first among the proxy's IPs"),
  SERVICE_ACCOUNT: d("SERVICE_ACCOUNT", "string", "", "identity", "Service account; the SPIFFE ID's sa segment"),
  HOST_IP: d("HOST_IP", "string", "", "identity", "Node IP; replaces $(HOST_IP) in tracer/statsd addresses and ISTIO_BOOTSTRAP_OVERRIDE"),
  ISTIO_META_CLUSTER_ID: d("ISTIO_META_CLUSTER_ID", "string", "", "identity", "Cluster ID sent as ClusterID on xDS and CSR requests"),
  KUBERNETES_SERVICE_HOST: d("KUBERNETES_SERVICE_HOST", "string", "", "identity", "Set under Kubernetes; OUTPUT_CERTS files become 0644"),
  TRUST_DOMAIN: d("TRUST_DOMAIN", "string", "cluster.local", "identity", "SPIFFE trust domain of the workload identity"),

  // Proxy config
  PROXY_CONFIG: d("PROXY_CONFIG", "string", "", "config", "ProxyConfig (YAML or JSON) layered over the mesh config's defaultConfig"),
  ISTIO_CPU_LIMIT: d("ISTIO_CPU_LIMIT", "int", 0, "config", "CPU limit; sets Envoy concurrency when ProxyConfig leaves it unset", { range: { min: 0 } }),

  // Cloud platform (src/platform/)
  CLOUD_PLATFORM: d("CLOUD_PLATFORM", "string", "", "platform", "aws|azure|gcp|none: the platform, instead of probing GCP, AWS and Azure (5s budget)"),
  GCP_METADATA: d(
    "GCP_METADATA",
    "string",
    "",
    "platform",
    "PROJECT_ID|PROJECT_NUMBER|CLUSTER_NAME|CLUSTER_ZONE: static GCP metadata; the metadata server is not asked",
  ),
  GCP_QUOTA_PROJECT: d("GCP_QUOTA_PROJECT", "string", "", "platform", "gcp_quota_project platform metadata (with GCP_METADATA)"),
  GCP_ZONE: d("GCP_ZONE", "string", "", "platform", "gcp_zone platform metadata and the locality zone (with GCP_METADATA)"),
  GCE_METADATA_HOST: d("GCE_METADATA_HOST", "string", "", "platform", "host[:port] of the GCE metadata server (default 169.254.169.254); set means on GCE"),
  GKE_CLUSTER_URL: d(
    "GKE_CLUSTER_URL",
    "string",
    "",
    "platform",
    "The url of GKE cluster: the provider in the STS (--stsPort) federated token audience when the credential fetcher names none",
  ),
  GOOGLE_STS_ENDPOINT: d(
    "GOOGLE_STS_ENDPOINT",
    "string",
    "https://sts.googleapis.com/v1/token",
    "platform",
    "Beyond Istio: Google STS token endpoint the --stsPort service exchanges subject tokens at",
  ),
  GOOGLE_IAM_CREDENTIALS_ENDPOINT: d(
    "GOOGLE_IAM_CREDENTIALS_ENDPOINT",
    "string",
    "https://iamcredentials.googleapis.com",
    "platform",
    "Beyond Istio: base URL of Google's IAM credentials API (generateAccessToken) for the --stsPort service",
  ),

  // Envoy and bootstrap
  DISABLE_ENVOY: d("DISABLE_ENVOY", "bool", false, "envoy", "Proxyless mode: no Envoy, no SDS server; certificates kept fresh in OUTPUT_CERTS"),
  ENVOY_SKIP_DEPRECATED_LOGS: d("ENVOY_SKIP_DEPRECATED_LOGS", "bool", true, "envoy", "Pass --skip-deprecated-logs to Envoy"),
  ISTIO_ENVOY_ENABLE_CORE_DUMP: d("ISTIO_ENVOY_ENABLE_CORE_DUMP", "bool", false, "envoy", "Pass --enable-core-dump to Envoy"),
  ISTIO_BOOTSTRAP_OVERRIDE: d("ISTIO_BOOTSTRAP_OVERRIDE", "string", "", "envoy", "YAML/JSON file merged by Envoy via --config-yaml ($(HOST_IP) substituted)"),
  ISTIO_BOOTSTRAP: d("ISTIO_BOOTSTRAP", "string", "", "envoy", "Bootstrap template path; wins over every other template setting"),
  ENVOY_STATUS_PORT: d("ENVOY_STATUS_PORT", "int", 15021, "envoy", "Envoy health listener port (/healthz/ready)", { range: { min: 0, max: 65535 } }),
  ENVOY_PROMETHEUS_PORT: d("ENVOY_PROMETHEUS_PORT", "int", 15090, "envoy", "Envoy Prometheus listener port", { range: { min: 0, max: 65535 } }),
  ENVOY_SECURE_METRICS_PORT: d("ENVOY_SECURE_METRICS_PORT", "int", 0, "envoy", "mTLS Envoy-only metrics listener port (0 = off)", {
    range: { min: 0, max: 65535 },
  }),
  ENVOY_SECURE_MERGED_METRICS_PORT: d("ENVOY_SECURE_MERGED_METRICS_PORT", "int", 0, "envoy", "mTLS merged metrics listener port (0 = off)", {
    range: { min: 0, max: 65535 },
  }),
  MINIMUM_DRAIN_DURATION: d(
    "MINIMUM_DRAIN_DURATION",
    "duration",
    5000,
    "envoy",
    "With EXIT_ON_ZERO_ACTIVE_CONNECTIONS: wait this long before polling connections",
    { range: { min: 0, max: MAX_TIMER_MS } },
  ),
  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: d(
    "EXIT_ON_ZERO_ACTIVE_CONNECTIONS",
    "bool",
    false,
    "envoy",
    "On shutdown, exit once Envoy has no active downstream connections",
  ),
  TERMINATION_GRACE_PERIOD_SECONDS: d(
    "TERMINATION_GRACE_PERIOD_SECONDS",
    "int",
    0,
    "envoy",
    "Beyond Istio: the pod's terminationGracePeriodSeconds (0 = unknown); the logged drain plan warns when it cannot fit, and the EXIT_ON_ZERO_ACTIVE_CONNECTIONS polling ends in time to stop Envoy before kubelet's SIGKILL",
    { range: { min: 0 } },
  ),
  PEER_METADATA_DISCOVERY: d("PEER_METADATA_DISCOVERY", "optbool", undefined, "envoy", "Metadata discovery; unset follows ISTIO_META_ENABLE_HBONE"),
  ISTIO_META_ENABLE_HBONE: d("ISTIO_META_ENABLE_HBONE", "bool", false, "envoy", "HBONE enabled for this proxy"),
  ISTIO_META_ENABLE_SELF_DISCOVERY: d("ISTIO_META_ENABLE_SELF_DISCOVERY", "bool", false, "envoy", "Add local_cluster to the bootstrap"),
  HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED: d(
    "HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED",
    "bool",
    true,
    "envoy",
    "false adds the runtime flag http_strip_fragment_from_path_unsafe_if_disabled",
  ),
  COMPLIANCE_POLICY: d(
    "COMPLIANCE_POLICY",
    "string",
    "",
    "envoy",
    "fips-140-2 | fips-140-3 | pqc: restricts TLS versions, ciphers and curves (Envoy and the agent's own TLS to istiod and the CA)",
  ),
  GODEBUG: d(
    "GODEBUG",
    "string",
    "",
    "envoy",
    "Set by the injector with fips-140-3; fips140=only without COMPLIANCE_POLICY means COMPLIANCE_POLICY=fips-140-3",
  ),
  GOMEMLIMIT: d("GOMEMLIMIT", "string", "", "config", "The agent's soft memory cap (bytes, or with B/KiB/MiB/GiB/TiB; off): a full GC runs above 90% of it"),
  ISTIO_DELTA_XDS: d("ISTIO_DELTA_XDS", "bool", true, "envoy", "Envoy uses Delta xDS (DELTA_GRPC) instead of SotW"),
  ISTIO_DUAL_STACK: d("ISTIO_DUAL_STACK", "bool", false, "envoy", "Dual-stack bootstrap (additional localhost/wildcard, lookup family ALL)"),
  ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL: d("ENVOY_STATUS_PORT_ENABLE_PROXY_PROTOCOL", "bool", false, "envoy", "PROXY protocol on the Envoy health listener"),
  METRICS_LOCALHOST_ACCESS_ONLY: d("METRICS_LOCALHOST_ACCESS_ONLY", "bool", false, "envoy", "Metrics endpoints answer loopback clients only"),
  ENVOY_RESTART_POLICY: d(
    "ENVOY_RESTART_POLICY",
    "string",
    "never",
    "envoy",
    "never (Istio's behaviour): when Envoy exits the agent logs it and exits 0; opt-in on-failure restarts a crashed Envoy with backoff",
  ),
  ENVOY_RESTART_BACKOFF_BASE: d("ENVOY_RESTART_BACKOFF_BASE", "duration", 200, "envoy", "Beyond Istio: first restart delay, doubled each time", {
    range: { min: 1, max: MAX_TIMER_MS },
  }),
  ENVOY_RESTART_BACKOFF_MAX: d("ENVOY_RESTART_BACKOFF_MAX", "duration", 30_000, "envoy", "Beyond Istio: restart delay cap", {
    range: { min: 1, max: MAX_TIMER_MS },
  }),
  ENVOY_RESTART_BUDGET: d("ENVOY_RESTART_BUDGET", "int", 10, "envoy", "Beyond Istio: restarts allowed within ENVOY_RESTART_WINDOW before the agent gives up", {
    range: { min: 0 },
  }),
  ENVOY_RESTART_WINDOW: d("ENVOY_RESTART_WINDOW", "duration", 600_000, "envoy", "Beyond Istio: window for ENVOY_RESTART_BUDGET", { range: { min: 1 } }),
  ENVOY_HOT_RESTART: d(
    "ENVOY_HOT_RESTART",
    "bool",
    false,
    "envoy",
    "Beyond Istio: hot-restart Envoy (new epoch) when its config or mounted certificates change",
  ),

  // Security / CA
  CA_ADDR: d("CA_ADDR", "string", "", "security", "CA address; empty means the discovery address"),
  CA_PROVIDER: d("CA_PROVIDER", "string", "Citadel", "security", "Citadel (istiod), GkeWorkloadCertificate (files), or local (beyond Istio: in-process CA)"),
  CA_ROOT_CA: d("CA_ROOT_CA", "string", "", "security", "Root for the CA connection: a path or SYSTEM"),
  XDS_ROOT_CA: d("XDS_ROOT_CA", "string", "", "security", "Root for the istiod connection: a path or SYSTEM"),
  ISTIOD_SAN: d("ISTIOD_SAN", "string", "", "security", "TLS server name override for istiod"),
  PILOT_CERT_PROVIDER: d("PILOT_CERT_PROVIDER", "string", "istiod", "security", "istiod | custom (./etc/certs/root-cert.pem) | none"),
  JWT_POLICY: d("JWT_POLICY", "string", "third-party-jwt", "security", "Token policy; the token is always ./var/run/secrets/tokens/istio-token"),
  PROV_CERT: d("PROV_CERT", "string", "", "security", "Directory of provisioning certificates (client cert to istiod and the CA)"),
  OUTPUT_CERTS: d("OUTPUT_CERTS", "string", "", "security", "Directory to write key.pem, cert-chain.pem, root-cert.pem"),
  FILE_MOUNTED_CERTS: d("FILE_MOUNTED_CERTS", "bool", false, "security", "Use mounted certificates instead of the CA"),
  SECRET_TTL: d("SECRET_TTL", "duration", 24 * 3_600_000, "security", "Requested workload certificate lifetime", { range: { min: 1000 } }),
  SECRET_GRACE_PERIOD_RATIO: d("SECRET_GRACE_PERIOD_RATIO", "float", 0.5, "security", "Rotate when this fraction of the lifetime remains", {
    range: { min: 0, max: 1 },
  }),
  SECRET_GRACE_PERIOD_RATIO_JITTER: d("SECRET_GRACE_PERIOD_RATIO_JITTER", "float", 0.01, "security", "Random jitter added to the grace ratio", {
    range: { min: 0, max: 1 },
  }),
  FILE_DEBOUNCE_DURATION: d("FILE_DEBOUNCE_DURATION", "duration", 100, "security", "Debounce for certificate file changes", {
    range: { min: 0, max: MAX_TIMER_MS },
  }),
  WORKLOAD_RSA_KEY_SIZE: d("WORKLOAD_RSA_KEY_SIZE", "int", 2048, "security", "RSA key size (at least 2048)", { range: { max: 8192 } }),
  PKCS8_KEY: d("PKCS8_KEY", "bool", false, "security", "Write keys as PKCS#8"),
  ECC_SIGNATURE_ALGORITHM: d("ECC_SIGNATURE_ALGORITHM", "string", "", "security", "ECDSA for EC keys instead of RSA"),
  ECC_CURVE: d("ECC_CURVE", "string", "P256", "security", "P256 | P384"),
  CREDENTIAL_FETCHER_TYPE: d(
    "CREDENTIAL_FETCHER_TYPE",
    "string",
    "JWT",
    "security",
    "Token source: JWT (token file), GoogleComputeEngine (GCE metadata identity token, audience TRUST_DOMAIN), Mock (tests)",
  ),
  CREDENTIAL_IDENTITY_PROVIDER: d(
    "CREDENTIAL_IDENTITY_PROVIDER",
    "string",
    "GoogleComputeEngine",
    "security",
    "Identity provider named by non-JWT credential fetchers (logged; Istio keeps it unused too)",
  ),
  ISTIO_META_CERT_SIGNER: d("ISTIO_META_CERT_SIGNER", "string", "", "security", "CertSigner metadata on CSRs"),
  WORKLOAD_IDENTITY_SOCKET_FILE: d(
    "WORKLOAD_IDENTITY_SOCKET_FILE",
    "string",
    "socket",
    "security",
    "SDS socket file name under ./var/run/secrets/workload-spiffe-uds/",
  ),
  PILOT_ENABLE_CA_CRL: d("PILOT_ENABLE_CA_CRL", "bool", true, "security", "Attach the CA CRL file to root secrets when present"),
  XDS_AUTH_PROVIDER: d("XDS_AUTH_PROVIDER", "string", "", "security", "Accepted for compatibility; unused"),
  XDS_AUTHORIZED_UIDS: d(
    "XDS_AUTHORIZED_UIDS",
    "string",
    "",
    "security",
    "Beyond Istio: UIDs allowed on the XDS/SDS sockets (default: own UID, 1337, 0; any UID with DISABLE_ENVOY; * = any)",
  ),
  LOCAL_CA_DIR: d(
    "LOCAL_CA_DIR",
    "string",
    "",
    "security",
    "Beyond Istio: with CA_PROVIDER=local, load root-cert.pem/root-key.pem from here instead of generating",
  ),

  // xDS
  PROXY_CONFIG_XDS_AGENT: d("PROXY_CONFIG_XDS_AGENT", "bool", false, "xds", "Subscribe to ProxyConfig (PCDS) for trust bundles"),
  GRPC_XDS_BOOTSTRAP: d("GRPC_XDS_BOOTSTRAP", "string", "./etc/istio/proxy/grpc-bootstrap.json", "xds", "Where the proxyless gRPC bootstrap is written"),
  GRPC_KEEPALIVE_INTERVAL: d("GRPC_KEEPALIVE_INTERVAL", "duration", 30_000, "xds", "Keepalive ping interval to istiod", {
    range: { min: 0, max: MAX_TIMER_MS },
  }),
  GRPC_KEEPALIVE_TIMEOUT: d("GRPC_KEEPALIVE_TIMEOUT", "duration", 10_000, "xds", "Keepalive ping timeout", { range: { min: 1, max: MAX_TIMER_MS } }),
  ISTIO_GPRC_MAXSTREAMS: d("ISTIO_GPRC_MAXSTREAMS", "int", 100000, "xds", "Max concurrent streams on the agent's gRPC servers", {
    range: { min: 1, max: 2147483647 },
  }),
  ISTIO_GPRC_MAXRECVMSGSIZE: d("ISTIO_GPRC_MAXRECVMSGSIZE", "int", 4194304, "xds", "Max message size received from Envoy", {
    range: { min: 1, max: 2147483647 },
  }),
  ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION: d(
    "ISTIO_AGENT_ENABLE_WASM_REMOTE_LOAD_CONVERSION",
    "bool",
    true,
    "xds",
    "Rewrite remote Wasm ECDS resources to local files",
  ),
  WASM_INSECURE_REGISTRIES: d(
    "WASM_INSECURE_REGISTRIES",
    "string",
    "",
    "wasm",
    "Registries (host[:port], comma-separated, * = all) whose TLS certificates are not verified for Wasm pulls",
  ),
  WASM_MODULE_EXPIRY: d("WASM_MODULE_EXPIRY", "duration", 86_400_000, "wasm", "Cached Wasm modules untouched this long are removed", {
    range: { min: 1, max: 31_536_000_000 },
  }),
  WASM_PURGE_INTERVAL: d("WASM_PURGE_INTERVAL", "duration", 3_600_000, "wasm", "How often expired Wasm modules are removed", {
    range: { min: 1000, max: MAX_TIMER_MS },
  }),
  WASM_HTTP_REQUEST_TIMEOUT: d("WASM_HTTP_REQUEST_TIMEOUT", "duration", 15_000, "wasm", "Timeout of one HTTP(S) request for a Wasm module", {
    range: { min: 1, max: 86_400_000 },
  }),
  WASM_HTTP_REQUEST_MAX_RETRIES: d("WASM_HTTP_REQUEST_MAX_RETRIES", "int", 5, "wasm", "Attempts at an HTTP(S) Wasm download before giving up", {
    range: { min: 1, max: 100 },
  }),
  BLOCKED_CIDRS_IN_WASM_FETCH: d(
    "BLOCKED_CIDRS_IN_WASM_FETCH",
    "string",
    "",
    "wasm",
    "CIDRs (comma-separated) Wasm modules may not be fetched from, checked after resolution and on redirects; link-local and cloud metadata addresses always are",
  ),
  ISTIO_WASM_MAX_BINARY_SIZE_BYTES: d("ISTIO_WASM_MAX_BINARY_SIZE_BYTES", "int", 268_435_456, "wasm", "Largest Wasm module (or layer) downloaded", {
    range: { min: 8, max: 4_294_967_296 },
  }),
  LOCAL_XDS_PATH: d("LOCAL_XDS_PATH", "string", "", "xds", "Beyond Istio: serve xDS from this YAML/JSON file instead of dialing istiod"),

  // DNS
  ISTIO_META_DNS_CAPTURE: d("ISTIO_META_DNS_CAPTURE", "bool", false, "dns", "Enable the DNS proxy (sidecars)"),
  ISTIO_META_ENABLE_DNS_SERVER: d("ISTIO_META_ENABLE_DNS_SERVER", "bool", false, "dns", "Enable the DNS proxy (any proxy type)"),
  DNS_PROXY_ADDR: d("DNS_PROXY_ADDR", "string", "localhost:15053", "dns", "DNS proxy listen address (UDP and TCP)"),
  DNS_FORWARD_PARALLEL: d("DNS_FORWARD_PARALLEL", "bool", false, "dns", "Query all upstream resolvers at once"),
  DNS_FORWARD_TIMEOUT: d("DNS_FORWARD_TIMEOUT", "duration", 5000, "dns", "Upstream DNS timeout", { range: { min: 1, max: MAX_TIMER_MS } }),

  // Status / probes / metrics
  ISTIO_KUBE_APP_PROBERS: d("ISTIO_KUBE_APP_PROBERS", "string", "", "status", "Rewritten application probes (JSON), served under /app-health/"),
  ISTIO_PROMETHEUS_ANNOTATIONS: d("ISTIO_PROMETHEUS_ANNOTATIONS", "string", "", "status", "Application scrape targets merged into /stats/prometheus"),
  ISTIO_ENABLE_HTTP2_PROBING: d("ISTIO_ENABLE_HTTP2_PROBING", "bool", true, "status", "HTTP/2 for HTTPS app probes"),
  REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION: d(
    "REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION",
    "bool",
    false,
    "status",
    "Send app probes to localhost instead of INSTANCE_IP",
  ),
  ENABLE_PROBE_KEEPALIVE_CONNECTIONS: d("ENABLE_PROBE_KEEPALIVE_CONNECTIONS", "bool", false, "status", "Reuse connections for app probes"),
  PILOT_AGENT_MERGE_ENVOY_STATS: d("PILOT_AGENT_MERGE_ENVOY_STATS", "bool", true, "status", "Include Envoy's stats in the merged scrape"),

  // Traffic capture tracing
  IPTABLES_TRACE_LOGGING: d(
    "IPTABLES_TRACE_LOGGING",
    "bool",
    false,
    "iptables",
    "Beyond Istio: log one line per packet matched by a traced capture rule (NFLOG group 1337)",
  ),
} as const;

export type ProxyEnvDecls = typeof PROXY_ENV;
