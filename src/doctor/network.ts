// Can the agent reach istiod and the CA: the name resolves (and where from: /etc/hosts or DNS),
// TCP connects, and TLS completes with the configured root and the expected server name (SAN).
// Every step is bounded by the caller's timeout.

import { lookup } from "node:dns/promises";
import { isIP, connect as tcpConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { errorMessage } from "../lib/errors.ts";
import { fail, ok, skip, warn, type Finding } from "./finding.ts";

/** `rootPath` when the system's trust store is used. */
export const SYSTEM_ROOTS = "the system's roots";

export interface Endpoint {
  /** `istiod` or `ca`: the check names carry it. */
  label: string;
  /** host:port as configured. */
  address: string;
  /** Where the address was configured (`discoveryAddress (PROXY_CONFIG)`, `CA_ADDR`). */
  origin: string;
  /** TLS: the root PEM to trust (undefined: the system's roots) and the expected name; undefined = plaintext. */
  tls?: { root?: Buffer; rootPath: string; servername: string; sanSetting: string };
}

export function splitAddress(address: string): { host: string; port: number } | undefined {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(address) ?? /^([^:]+):(\d+)$/.exec(address);
  if (!m) return undefined;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1]!, port } : undefined;
}

/** /etc/hosts lines naming `host`: `line N: <ip> <names>`. */
export function hostsEntries(text: string, host: string): { line: number; ip: string }[] {
  const out: { line: number; ip: string }[] = [];
  text.split("\n").forEach((raw, i) => {
    const fields = raw.replace(/#.*$/, "").trim().split(/\s+/);
    if (fields.length >= 2 && fields.slice(1).some((n) => n.toLowerCase() === host.toLowerCase())) out.push({ line: i + 1, ip: fields[0]! });
  });
  return out;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => (t = setTimeout(() => reject(new Error(`${what}: no answer within ${ms}ms`)), ms)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

/** The hosts-file check: an entry for the host (VMs outside the cluster's DNS need one). */
export function checkHosts(hostsPath: string, hostsText: string | undefined, ep: Endpoint, resolvedBy: string | undefined): Finding {
  const name = `hosts ${ep.label}`;
  const hp = splitAddress(ep.address);
  if (!hp || isIP(hp.host)) return skip(name, `${ep.address} is an IP address`);
  const entries = hostsText === undefined ? [] : hostsEntries(hostsText, hp.host);
  const ips = [...new Set(entries.map((e) => e.ip))];
  if (ips.length > 1) {
    return warn(
      name,
      `${hostsPath} names ${hp.host} with different addresses (${entries.map((e) => `line ${e.line}: ${e.ip}`).join(", ")}); the first one wins`,
      `keep one line for ${hp.host}`,
    );
  }
  if (entries.length) return ok(name, `${hostsPath} line ${entries[0]!.line}: ${entries[0]!.ip} ${hp.host}`);
  if (resolvedBy) return ok(name, `${hp.host} is not in ${hostsPath}; DNS resolves it (${resolvedBy})`);
  return fail(
    name,
    `${hp.host} (${ep.origin}) is not in ${hostsPath} and does not resolve`,
    `add "<istiod's address> ${hp.host}" to ${hostsPath} (istioctl x workload entry configure writes the line to its hosts file)`,
  );
}

/** Resolve, connect, handshake: one finding per step reached; later steps are skipped once one fails. */
export async function checkEndpoint(ep: Endpoint, timeoutMs: number): Promise<{ findings: Finding[]; resolved?: string }> {
  const findings: Finding[] = [];
  const hp = splitAddress(ep.address);
  if (!hp) return { findings: [fail(`resolve ${ep.label}`, `${ep.origin} "${ep.address}" is not host:port`)] };
  let ip = hp.host;
  let resolved: string | undefined;
  if (!isIP(hp.host)) {
    try {
      const all = await withTimeout(lookup(hp.host, { all: true }), timeoutMs, `resolving ${hp.host}`);
      ip = all[0]!.address;
      resolved = all.map((a) => a.address).join(", ");
      findings.push(ok(`resolve ${ep.label}`, `${hp.host} (${ep.origin}) resolves to ${resolved}`));
    } catch (e) {
      findings.push(
        fail(
          `resolve ${ep.label}`,
          `${hp.host} (${ep.origin}) does not resolve: ${errorMessage(e)}`,
          `add "<address> ${hp.host}" to /etc/hosts, or fix ${ep.origin}`,
        ),
      );
      return { findings };
    }
  }
  try {
    await withTimeout(
      new Promise<void>((resolve, reject) => {
        const s: Socket = tcpConnect({ host: ip, port: hp.port }, () => {
          s.destroy();
          resolve();
        });
        s.on("error", reject);
        setTimeout(() => s.destroy(new Error(`connecting to ${ip}:${hp.port}: no answer within ${timeoutMs}ms`)), timeoutMs).unref();
      }),
      timeoutMs,
      `connecting to ${ip}:${hp.port}`,
    );
    findings.push(ok(`connect ${ep.label}`, `${ip}:${hp.port} accepts TCP`));
  } catch (e) {
    findings.push(
      fail(
        `connect ${ep.label}`,
        `${ip}:${hp.port} (${ep.origin}): ${errorMessage(e)}`,
        "check that istiod's east-west gateway or service is reachable from here (firewall, address)",
      ),
    );
    return { findings, ...(resolved ? { resolved } : {}) };
  }
  if (!ep.tls) findings.push(skip(`tls ${ep.label}`, `${ep.address} is plaintext`));
  else if (!ep.tls.root && ep.tls.rootPath !== SYSTEM_ROOTS) findings.push(skip(`tls ${ep.label}`, `no usable root at ${ep.tls.rootPath} (see root-cert)`));
  else findings.push(await checkTls(ep, ip, hp.port, timeoutMs));
  return { findings, ...(resolved ? { resolved } : {}) };
}

async function checkTls(ep: Endpoint, ip: string, port: number, timeoutMs: number): Promise<Finding> {
  const t = ep.tls!;
  const name = `tls ${ep.label}`;
  try {
    const sans = await withTimeout(
      new Promise<string>((resolve, reject) => {
        const s = tlsConnect(
          { host: ip, port, servername: isIP(t.servername) ? undefined : t.servername, ...(t.root ? { ca: t.root } : {}), minVersion: "TLSv1.2" },
          () => {
            const cert = s.getPeerCertificate();
            s.destroy();
            resolve(cert?.subjectaltname ?? "");
          },
        );
        s.on("error", reject);
        setTimeout(() => s.destroy(new Error(`TLS handshake with ${ip}:${port}: no answer within ${timeoutMs}ms`)), timeoutMs).unref();
      }),
      timeoutMs,
      `TLS handshake with ${ip}:${port}`,
    );
    return ok(name, `${ep.address}: TLS verified with ${t.rootPath}, name ${t.servername} matches (${sans})`);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? "";
    if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
      return fail(
        name,
        `${ep.address}: the server's certificate does not name ${t.servername}: ${errorMessage(e)}`,
        `set ${t.sanSetting} to a name the certificate carries`,
      );
    }
    if (/UNABLE_TO_VERIFY|SELF_SIGNED|CERT_SIGNATURE|UNABLE_TO_GET_ISSUER/.test(code)) {
      return fail(
        name,
        `${ep.address}: the server's certificate is not signed by ${t.rootPath} (${code})`,
        "the root is from another mesh or cluster: copy this mesh's root-cert.pem",
      );
    }
    return fail(name, `${ep.address}: TLS handshake failed: ${code ? code + ": " : ""}${errorMessage(e)}`);
  }
}
