// Dialing a gRPC server for the agent's own HTTP/2 client: plaintext TCP, or TLS with ALPN h2, the
// given root (none = the system's trust store), an optional client certificate, the server name
// the peer's certificate must carry (an IP address is checked against its IP SANs) and
// COMPLIANCE_POLICY's versions, suites and curves. Used by the xDS upstream and the CA client.

import net, { isIP } from "node:net";
import tls, { checkServerIdentity, type PeerCertificate } from "node:tls";
import { complianceTls } from "../lib/compliance.ts";

export interface TlsDialOptions {
  /** Trusted roots (PEM); undefined = the system's trust store. */
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  /** The name the server's certificate must carry; "" = the host dialed. */
  servername: string;
  /** COMPLIANCE_POLICY ("" = TLS defaults, at least 1.2). */
  compliancePolicy: string;
  /**
   * The context made by tlsContext() from these same ca, cert, key and policy, shared by dials;
   * the connection then takes its roots, certificate and policy from it (Bun ignores them beside it).
   */
  context?: tls.SecureContext;
}

/** The TLS context of `o`'s roots, client certificate and COMPLIANCE_POLICY, for several dials to share. */
export function tlsContext(o: TlsDialOptions): tls.SecureContext {
  return tls.createSecureContext({ ca: o.ca, cert: o.cert, key: o.key, ...complianceTls(o.compliancePolicy) });
}

export interface DialTarget {
  /** Host name or IP address (an IPv6 address with or without brackets). */
  host: string;
  port: number;
  /** TLS options; undefined = plaintext. */
  tls?: TlsDialOptions;
}

/** Opens the connection (asynchronously: writes are queued until it is up; failures arrive as the socket's error). */
export function dialSocket(t: DialTarget): net.Socket {
  const host = t.host.startsWith("[") ? t.host.slice(1, -1) : t.host;
  let socket: net.Socket;
  if (t.tls) {
    const o = t.tls;
    socket = tls.connect({
      host,
      port: t.port,
      ca: o.ca,
      cert: o.cert,
      key: o.key,
      ...serverNameOptions(o.servername),
      ALPNProtocols: ["h2"],
      ...complianceTls(o.compliancePolicy),
      ...(o.context ? { secureContext: o.context } : {}),
    });
  } else {
    socket = net.connect({ host, port: t.port });
  }
  socket.setNoDelay?.(true);
  return socket;
}

/**
 * TLS options naming the server the peer must prove to be. Bun refuses an IP address as the TLS
 * server name (Node only warns), which would make every VM dialing istiod by IP fail: for an IP,
 * send no SNI and check the certificate against that IP ourselves.
 */
export function serverNameOptions(servername: string): {
  servername?: string;
  checkServerIdentity?: (host: string, cert: PeerCertificate) => Error | undefined;
} {
  if (servername && isIP(servername) !== 0) return { checkServerIdentity: (_host, cert) => checkServerIdentity(servername, cert) };
  return servername ? { servername } : {};
}
