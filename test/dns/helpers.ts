// Test fixtures for the DNS proxy: a small upstream resolver of our own (UDP + TCP on one
// loopback port, dns-packet), a `dig` runner returning its YAML output parsed, and the name table
// Istio's own DNS tests use.

import * as packet from "dns-packet";
import { parse } from "yaml";
import type { Socket, TCPSocketListener } from "bun";
import { nameInfo, type NameTable } from "../../src/dns/nametable.ts";
import type { Requirements } from "../support/requires.ts";

export interface UpstreamOptions {
  host?: string;
  port?: number;
  /** name (no trailing dot, lower case) -> IPv4 answer */
  answers?: Record<string, string>;
  /** Never answer (a resolver that is up but mute). */
  silent?: boolean;
  /** Answer TCP queries this long after they arrive (a slow resolver). */
  tcpDelayMs?: number;
}

export interface TestUpstream {
  host: string;
  port: number;
  /** Queries received, by protocol. */
  received: { udp: number; tcp: number };
  names: string[];
  /** TCP connections open now (as this side has seen them close) and the most at once; TCP queries received and not yet answered, and the most at once. */
  tcp: { open: number; peak: number; total: number; pending: number; pendingPeak: number };
  close(): void;
}

/** 64 A records for `giant.` (over 512 bytes), as in Istio's tests. */
const GIANT = Array.from({ length: 64 }, (_, i) => `240.0.0.${i}`);

function answerFor(opts: UpstreamOptions, query: Buffer, protocol: "udp" | "tcp"): Buffer | undefined {
  let q: packet.DecodedPacket;
  try {
    q = packet.decode(query);
  } catch {
    return undefined;
  }
  const question = q.questions?.[0];
  if (!question) return undefined;
  const name = question.name.toLowerCase();
  const opt = (q.additionals ?? []).find((r) => r.type === "OPT") as packet.OptAnswer | undefined;
  const base = { id: q.id, type: "response" as const, flags: (q.flags ?? 0) & packet.RECURSION_DESIRED, questions: [question] };
  const a = (ips: string[]) => ips.map((ip) => ({ type: "A" as const, name: question.name, ttl: 60, class: "IN" as const, data: ip }));
  if (name === "giant" || name === "giant-raw") {
    let answers = a(GIANT);
    let flags = base.flags;
    // `giant.` truncates like a compliant server; `giant-raw.` always sends everything.
    const limit = protocol === "tcp" ? 65535 : Math.max(512, opt?.udpPayloadSize ?? 0);
    if (name === "giant") {
      while (packet.encodingLength({ ...base, answers }) > limit) answers = answers.slice(0, -1);
      if (answers.length < GIANT.length) flags |= packet.TRUNCATED_RESPONSE;
    }
    return packet.encode({ ...base, flags, answers });
  }
  const ip = opts.answers?.[name];
  if (ip && question.type === "A") return packet.encode({ ...base, answers: a([ip]) });
  if (ip) return packet.encode({ ...base, answers: [] });
  return packet.encode({ ...base, flags: base.flags | 3, answers: [] }); // NXDOMAIN
}

/**
 * UDP and TCP on one port. With port 0 the UDP socket picks an ephemeral port that may be taken
 * for TCP: then both are released and the pair is tried again, like the proxy's own listener.
 */
export async function bindPair<U extends { port: number; close(): void }, T>(
  port: number,
  bindUdp: (port: number) => U | Promise<U>,
  bindTcp: (port: number) => T,
  attempts = 20,
): Promise<{ udp: U; tcp: T }> {
  let lastErr: unknown;
  for (let i = 0; i < (port === 0 ? attempts : 1); i++) {
    const udp = await bindUdp(port);
    try {
      return { udp, tcp: bindTcp(udp.port) };
    } catch (e) {
      udp.close();
      lastErr = e;
    }
  }
  throw new Error(`test upstream: no port free for both UDP and TCP after ${attempts} attempts: ${(lastErr as Error)?.message ?? lastErr}`);
}

export async function startUpstream(opts: UpstreamOptions = {}): Promise<TestUpstream> {
  const host = opts.host ?? "127.0.0.1";
  const received = { udp: 0, tcp: 0 };
  const conns = { open: 0, peak: 0, total: 0, pending: 0, pendingPeak: 0 };
  const names: string[] = [];
  const note = (b: Buffer) => {
    try {
      names.push(packet.decode(b).questions?.[0]?.name ?? "");
    } catch {
      names.push("<malformed>");
    }
  };
  const bindUdp = (port: number) =>
    Bun.udpSocket({
      hostname: host,
      port,
      socket: {
        data(s, data, port, addr) {
          received.udp++;
          note(data);
          if (opts.silent) return;
          const r = answerFor(opts, data, "udp");
          // The client may have gone (a fuzz burst's socket closed): an ICMP refusal is not the fake's failure.
          if (r) {
            try {
              s.send(r, port, addr);
            } catch {}
          }
        },
      },
    });
  const bindTcp = (port: number): TCPSocketListener<{ buf: Buffer }> =>
    Bun.listen<{ buf: Buffer }>({
      hostname: host,
      port,
      socket: {
        open(s) {
          s.data = { buf: Buffer.alloc(0) };
          conns.open++;
          conns.total++;
          conns.peak = Math.max(conns.peak, conns.open);
        },
        close() {
          conns.open--;
        },
        data(s: Socket<{ buf: Buffer }>, chunk) {
          s.data.buf = Buffer.concat([s.data.buf, chunk]);
          while (s.data.buf.length >= 2) {
            const len = s.data.buf.readUInt16BE(0);
            if (s.data.buf.length < 2 + len) return;
            const msg = s.data.buf.subarray(2, 2 + len);
            s.data.buf = s.data.buf.subarray(2 + len);
            received.tcp++;
            note(msg);
            if (opts.silent) continue;
            const r = answerFor(opts, Buffer.from(msg), "tcp");
            if (r) {
              const frame = Buffer.alloc(2 + r.length);
              frame.writeUInt16BE(r.length, 0);
              r.copy(frame, 2);
              conns.pending++;
              conns.pendingPeak = Math.max(conns.pendingPeak, conns.pending);
              const answer = () => {
                conns.pending--;
                s.write(frame);
              };
              if (opts.tcpDelayMs) setTimeout(answer, opts.tcpDelayMs);
              else answer();
            }
          }
        },
      },
    });
  const { udp, tcp } = await bindPair(opts.port ?? 0, bindUdp, bindTcp);
  return {
    host,
    port: udp.port,
    received,
    names,
    tcp: conns,
    close() {
      udp.close();
      tcp.stop(true);
    },
  };
}

export interface DigResult {
  status: string;
  flags: string[];
  /** Answer records as `name ttl class type data` strings. */
  answers: string[];
  /** Just the record data of the answers (IP addresses, CNAME targets). */
  data: string[];
  protocol: string;
  size: number;
}

/** What the dig-based tests need (test/support/requires.ts). */
export const DIG: Requirements = { tools: ["dig"], apt: ["dnsutils"] };

/** Run dig against the proxy; `extra` are dig options such as `+tcp`, `+noedns`, `+ignore`. */
export async function dig(port: number, name: string, type = "A", extra: string[] = [], server = "127.0.0.1"): Promise<DigResult> {
  const proc = Bun.spawn(["dig", `@${server}`, "-p", String(port), name, type, "+yaml", "+tries=1", "+time=5", "+norecurse", ...extra], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  const docs = parse(out, { version: "1.1" }) as
    { message?: { response_message_data?: Record<string, unknown>; socket_protocol?: string; message_size?: string } }[] | null;
  const msg = docs?.find((d) => d?.message?.response_message_data)?.message;
  const data = msg?.response_message_data;
  if (!msg || !data) throw new Error(`dig ${name} ${type} ${extra.join(" ")}: no answer\n${out}\n${err}`);
  const answers = ((data.ANSWER_SECTION as string[] | undefined) ?? []).map((s) => s.replace(/\s+/g, " "));
  return {
    status: String(data.status),
    flags: String(data.flags).split(" "),
    answers,
    data: answers.map((a) => a.split(" ").slice(4).join(" ")),
    protocol: String(msg.socket_protocol),
    size: parseInt(String(msg.message_size), 10),
  };
}

/** The table of Istio's pkg/dns/client/dns_test.go (fillTable), proxy in namespace ns1. */
export function istioTestTable(): NameTable {
  const k8s = (ips: string[], shortname: string, namespace: string, altHosts: string[] = []) =>
    nameInfo({ ips, registry: "Kubernetes", shortname, namespace, altHosts });
  const ext = (ips: string[]) => nameInfo({ ips, registry: "External" });
  return {
    table: {
      "www.google.com": ext(["1.1.1.1"]),
      "productpage.ns1.svc.cluster.local": k8s(["9.9.9.9"], "productpage", "ns1"),
      "example.ns2.svc.cluster.local": k8s(["10.10.10.10"], "example", "ns2"),
      "details.ns2.svc.cluster.remote": k8s(["11.11.11.11", "12.12.12.12", "13.13.13.13", "14.14.14.14"], "details", "ns2"),
      "svc-with-alt.ns1.svc.cluster.local": k8s(["15.15.15.15"], "svc-with-alt", "ns1", ["svc-with-alt.ns1.svc.clusterset.local"]),
      "ipv6.localhost": ext(["2001:db8:0:0:0:ff00:42:8329"]),
      "dual.localhost": ext(["2.2.2.2", "2001:db8:0:0:0:ff00:42:8329"]),
      "ipv4.localhost": ext(["2.2.2.2"]),
      "*.b.wildcard": ext(["11.11.11.11"]),
      "*.wildcard": ext(["10.10.10.10"]),
      "*.svc.mesh.company.net": ext(["10.1.2.3"]),
      "example.localhost.": ext(["3.3.3.3"]),
    },
  };
}

export const ISTIO_TEST_SEARCH = ["ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"];
