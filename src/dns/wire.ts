// DNS wire format at the proxy's edges. Queries are validated with dns-packet (any packet it cannot
// decode is malformed); the question's raw bytes are kept so replies echo it exactly as sent.
// Local answers are written here directly, with name compression (owner names point at the
// question or the CNAME target, as miekg/dns compresses Istio's answers), so a headless service
// fits as many addresses into 512 bytes as Istio's proxy does; dns-packet does not compress.
// Forwarded answers are relayed as received and only re-encoded when they must be truncated.

import * as packet from "dns-packet";
import { TYPE_A, TYPE_AAAA, TYPE_CNAME, type LookupResult } from "./lookup.ts";
export { encodeName } from "./names.ts";

export const RCODE_NOERROR = 0;
export const RCODE_FORMERR = 1;
export const RCODE_SERVFAIL = 2;
export const RCODE_NXDOMAIN = 3;
export const RCODE_NOTIMP = 4;

export const FLAG_QR = 0x8000;
export const FLAG_AA = 0x0400;
export const FLAG_TC = 0x0200;
export const FLAG_RD = 0x0100;
export const FLAG_RA = 0x0080;
export const FLAG_CD = 0x0010;

/** Answers' TTL, as Istio's (not configurable there either). */
export const TTL_SECONDS = 30;
export const MIN_UDP_SIZE = 512;
export const MAX_MSG_SIZE = 65535;

export interface Question {
  /** Name, type and class exactly as sent. */
  raw: Uint8Array;
  qtype: number;
  /** Lower-case name with a trailing dot; undefined when a label holds a dot or the name is compressed. */
  key: string | undefined;
}

export interface Query {
  bytes: Uint8Array;
  id: number;
  flags: number;
  opcode: number;
  qdcount: number;
  question: Question | undefined;
  /** EDNS0 UDP payload size advertised by the client (0 without OPT). */
  ednsSize: number;
}

export type ParseResult = { ok: true; query: Query } | { ok: false; reason: "malformed" | "response" };

export function parseQuery(bytes: Uint8Array): ParseResult {
  if (bytes.length < 12) return { ok: false, reason: "malformed" };
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const flags = (buf[2]! << 8) | buf[3]!;
  if (flags & FLAG_QR) return { ok: false, reason: "response" };
  let decoded: packet.DecodedPacket;
  try {
    decoded = packet.decode(buf);
  } catch {
    return { ok: false, reason: "malformed" };
  }
  let ednsSize = 0;
  for (const r of decoded.additionals ?? []) {
    if (r.type === "OPT") ednsSize = (r as packet.OptAnswer).udpPayloadSize ?? 0;
  }
  const qdcount = (buf[4]! << 8) | buf[5]!;
  const query: Query = {
    bytes: buf,
    id: (buf[0]! << 8) | buf[1]!,
    flags,
    opcode: (flags >> 11) & 0xf,
    qdcount,
    question: qdcount > 0 ? readQuestion(buf) : undefined,
    ednsSize,
  };
  return { ok: true, query };
}

/** The first question at offset 12 (dns-packet already proved it is well formed). */
function readQuestion(buf: Uint8Array): Question | undefined {
  let off = 12;
  let key = "";
  let plain = true;
  for (;;) {
    const len = buf[off]!;
    if (len === 0) {
      off += 1;
      break;
    }
    if ((len & 0xc0) !== 0) {
      // A pointer inside the first question can only point backwards into the header:
      // legal for dns-packet, meaningless as a name we own.
      plain = false;
      off += 2;
      break;
    }
    for (let i = off + 1; i <= off + len; i++) {
      let c = buf[i]!;
      if (c === 0x2e) plain = false;
      if (c >= 0x41 && c <= 0x5a) c += 0x20;
      key += String.fromCharCode(c);
    }
    key += ".";
    off += len + 1;
  }
  if (off + 4 > buf.length) return undefined;
  const qtype = (buf[off]! << 8) | buf[off + 1]!;
  return { raw: buf.subarray(12, off + 4), qtype, key: plain ? (key === "" ? "." : key) : undefined };
}

/** The largest reply the client accepts: 65535 over TCP, else the EDNS0 size (at least 512). */
export function replySizeLimit(protocol: "udp" | "tcp", q: Query): number {
  if (protocol === "tcp") return MAX_MSG_SIZE;
  return Math.min(MAX_MSG_SIZE, Math.max(MIN_UDP_SIZE, q.ednsSize));
}

/** Reply flags as miekg/dns SetReply makes them: QR, the query's opcode, RD and CD copied. */
function replyFlags(q: Query, rcode: number, extra: number): number {
  return FLAG_QR | (q.opcode << 11) | (q.flags & (FLAG_RD | FLAG_CD)) | extra | (rcode & 0xf);
}

function writeHeader(out: Uint8Array, id: number, flags: number, qd: number, an: number): void {
  out[0] = id >> 8;
  out[1] = id & 0xff;
  out[2] = flags >> 8;
  out[3] = flags & 0xff;
  out[4] = 0;
  out[5] = qd;
  out[6] = an >> 8;
  out[7] = an & 0xff;
  out[8] = out[9] = out[10] = out[11] = 0;
}

/** A reply carrying only the question and an rcode (SERVFAIL before the first table, NOTIMP...). */
export function rcodeReply(q: Query, rcode: number): Uint8Array {
  const qlen = q.question ? q.question.raw.length : 0;
  const out = new Uint8Array(12 + qlen);
  writeHeader(out, q.id, replyFlags(q, rcode, 0), q.question ? 1 : 0, 0);
  if (q.question) out.set(q.question.raw, 12);
  return out;
}

function writeRrHeader(out: Uint8Array, off: number, ptr: number, type: number, rdlen: number): number {
  out[off] = 0xc0 | (ptr >> 8);
  out[off + 1] = ptr & 0xff;
  out[off + 2] = type >> 8;
  out[off + 3] = type & 0xff;
  out[off + 4] = 0;
  out[off + 5] = 1; // class IN
  out[off + 6] = 0;
  out[off + 7] = 0;
  out[off + 8] = 0;
  out[off + 9] = TTL_SECONDS;
  out[off + 10] = rdlen >> 8;
  out[off + 11] = rdlen & 0xff;
  return off + 12;
}

/**
 * An authoritative answer from the table: CNAME first (when the question was a search
 * expansion), then the addresses in the order given (the caller shuffles them). Records that do
 * not fit `limit` are left out and TC is set, as miekg/dns Msg.Truncate does.
 */
export function localAnswer(q: Query, qtype: number, result: LookupResult, limit: number): Uint8Array {
  const cnameTarget = result.cnameWire;
  const question = q.question!;
  const addrType = qtype === TYPE_AAAA ? TYPE_AAAA : TYPE_A;
  const base = 12 + question.raw.length;
  const cnameLen = result.cname !== undefined && cnameTarget ? 12 + cnameTarget.length : 0;
  const addrLen = result.addresses.length > 0 ? 12 + result.addresses[0]!.length : 0;
  let count = result.addresses.length;
  let truncated = false;
  let total = base + cnameLen + count * addrLen;
  let withCname = cnameLen > 0;
  if (total > limit) {
    truncated = true;
    if (base + cnameLen > limit) {
      withCname = false;
      count = 0;
    } else {
      count = Math.floor((limit - base - cnameLen) / addrLen);
    }
    total = base + (withCname ? cnameLen : 0) + count * addrLen;
  }
  const out = new Uint8Array(total);
  writeHeader(out, q.id, replyFlags(q, RCODE_NOERROR, FLAG_AA | (truncated ? FLAG_TC : 0)), 1, (withCname ? 1 : 0) + count);
  out.set(question.raw, 12);
  let off = base;
  let owner = 12;
  if (withCname) {
    off = writeRrHeader(out, off, 12, TYPE_CNAME, cnameTarget!.length);
    owner = off;
    out.set(cnameTarget!, off);
    off += cnameTarget!.length;
  }
  for (let i = 0; i < count; i++) {
    const rd = result.addresses[i]!;
    off = writeRrHeader(out, off, owner, addrType, rd.length);
    out.set(rd, off);
    off += rd.length;
  }
  return out;
}

/** Uncompressed length of one record as dns-packet encodes it. */
function recordLength(r: packet.Answer): number {
  return (packet as unknown as { answer: { encodingLength(a: packet.Answer): number } }).answer.encodingLength(r);
}

/**
 * Make an upstream reply fit the client: returned as is when small enough; otherwise re-encoded
 * with as many records as fit (answers, then authorities, then additionals; OPT kept) and TC set.
 * If the reply cannot be re-encoded, an empty truncated reply sends the client to TCP.
 */
export function fitReply(q: Query, reply: Uint8Array, limit: number): Uint8Array {
  if (reply.length <= limit) return reply;
  try {
    const buf = Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength);
    const d = packet.decode(buf);
    const opt = (d.additionals ?? []).filter((r) => r.type === "OPT");
    const out: packet.Packet = {
      ...d,
      flags: (d.flags ?? 0) | FLAG_TC,
      answers: [],
      authorities: [],
      additionals: [...opt],
    };
    let len = packet.encodingLength(out);
    let full = false;
    for (const section of ["answers", "authorities", "additionals"] as const) {
      for (const r of d[section] ?? []) {
        if (full || r.type === "OPT") continue;
        const rlen = recordLength(r);
        if (len + rlen > limit) {
          full = true;
          continue;
        }
        len += rlen;
        out[section]!.push(r);
      }
    }
    const enc = packet.encode(out);
    if (enc.length <= limit) return enc;
  } catch {
    // fall through to the minimal truncated reply
  }
  const header = rcodeReply(q, (reply[3] ?? 0) & 0xf);
  header[2]! |= (reply[2]! & (FLAG_AA >> 8)) | (FLAG_TC >> 8);
  header[3]! |= reply[3]! & (FLAG_RA & 0xff);
  return header;
}
