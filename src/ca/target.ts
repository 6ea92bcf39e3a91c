// Where the CA client connects and what it calls the server: host and port of CA_ADDR (or the
// discovery address), gRPC's way — an optional `dns:///` scheme, brackets around an IPv6
// address, port 443 when none is given — and the :authority a gRPC client sends for it.

import { CaError } from "./errors.ts";

export interface CaTarget {
  host: string;
  port: number;
  /** host:port as written (without a scheme): gRPC's default :authority. */
  authority: string;
}

/** A host name or IP address (IPv6 with a zone): no path, user, query, brackets or spaces. */
const HOST = /^[\w.%:-]+$/;

/** gRPC's port when a target names none. */
const DEFAULT_PORT = 443;

export function caTarget(address: string): CaTarget {
  const authority = address.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*\//i, "");
  let host = authority;
  let portText: string | undefined;
  const bracket = /^\[([^\]]+)\](?::(.*))?$/.exec(authority);
  const colon = authority.indexOf(":");
  if (bracket) {
    host = bracket[1]!;
    portText = bracket[2];
  } else if (colon >= 0 && colon === authority.lastIndexOf(":")) {
    host = authority.slice(0, colon);
    portText = authority.slice(colon + 1);
  }
  // no port: gRPC's default; a colon with nothing after it is an error (grpc-go: "missing port")
  const port = portText === undefined ? DEFAULT_PORT : Number(portText);
  if (!HOST.test(host) || (portText !== undefined && !/^\d+$/.test(portText)) || port < 1 || port > 65535) {
    throw new CaError("config", `CA address "${address}" is not host:port (CA_ADDR, or the discovery address)`);
  }
  return { host, port, authority };
}
