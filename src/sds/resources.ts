// SDS resource names (Istio's pkg/security): `default` (workload key + chain), `ROOTCA`
// (workload trust bundle), `file-cert:<chain>~<key>`, `file-root:<ca>`, `file-root:system`.

export const WORKLOAD_KEY_CERT = "default";
export const ROOT_CA = "ROOTCA";
export const FILE_CERT_PREFIX = "file-cert:";
export const FILE_ROOT_PREFIX = "file-root:";
export const SYSTEM_ROOT = "file-root:system";

/** Where the OS trust bundle lives, first existing wins (Go's crypto/x509 list, as Istio). */
export const SYSTEM_ROOT_PATHS = [
  "/etc/ssl/certs/ca-certificates.crt",
  "/etc/pki/tls/certs/ca-bundle.crt",
  "/etc/ssl/ca-bundle.pem",
  "/etc/pki/tls/cacert.pem",
  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
  "/etc/ssl/cert.pem",
  "/usr/local/etc/ssl/cert.pem",
  "/etc/ssl/certs/ca-certificates",
];

export type ResourceRef =
  | { kind: "default" }
  | { kind: "rootca" }
  | { kind: "file-cert"; certPath: string; keyPath: string }
  | { kind: "file-root"; caPath: string }
  | { kind: "system-root" }
  | { kind: "invalid"; reason: string };

export function parseResourceName(name: string): ResourceRef {
  if (name === WORKLOAD_KEY_CERT) return { kind: "default" };
  if (name === ROOT_CA) return { kind: "rootca" };
  if (name === SYSTEM_ROOT) return { kind: "system-root" };
  if (name.startsWith(FILE_CERT_PREFIX)) {
    const rest = name.slice(FILE_CERT_PREFIX.length);
    const parts = rest.split("~");
    if (parts.length !== 2 || parts[0] === "" || parts[1] === "") {
      return { kind: "invalid", reason: `resource "${name}": want file-cert:<certificate chain path>~<private key path>` };
    }
    return { kind: "file-cert", certPath: parts[0]!, keyPath: parts[1]! };
  }
  if (name.startsWith(FILE_ROOT_PREFIX)) {
    const caPath = name.slice(FILE_ROOT_PREFIX.length);
    if (caPath === "") return { kind: "invalid", reason: `resource "${name}": want file-root:<CA bundle path>` };
    return { kind: "file-root", caPath };
  }
  return { kind: "invalid", reason: `unknown SDS resource "${name}" (want default, ROOTCA, file-cert:<chain>~<key>, file-root:<ca> or file-root:system)` };
}

/** Root resources are sent as a validation context; the others as a TLS certificate. */
export function isRootResource(name: string): boolean {
  return name === ROOT_CA || name.startsWith(FILE_ROOT_PREFIX);
}

export function isFileResource(name: string): boolean {
  return name.startsWith(FILE_CERT_PREFIX) || name.startsWith(FILE_ROOT_PREFIX);
}
