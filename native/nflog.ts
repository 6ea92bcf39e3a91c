// NFLOG reading over a netfilter netlink socket through bun:ffi on libc: socket(AF_NETLINK,
// SOCK_RAW, NETLINK_NETFILTER), bind, the nfnetlink_log config messages (bind group, copy mode,
// queue threshold), and non-blocking recv (MSG_DONTWAIT) so a reader polls without ever blocking
// the event loop. No compiler and no extra file at run time: works in the compiled binary.
// The wire format (nlmsghdr, nfgenmsg, attributes) is encoded/decoded by the pure functions below.

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0o2000000;
const NETLINK_NETFILTER = 12;
const SOL_SOCKET = 1;
const SO_RCVBUF = 8;
const MSG_DONTWAIT = 0x40;
const EAGAIN = 11;
const ENOBUFS = 105;

const NLMSG_ERROR = 2;
const NLM_F_REQUEST = 1;
const NLM_F_ACK = 4;
const NFNL_SUBSYS_ULOG = 4;
const NFULNL_MSG_PACKET = 0;
const NFULNL_MSG_CONFIG = 1;
const NFULA_CFG_CMD = 1;
const NFULA_CFG_MODE = 2;
const NFULA_CFG_QTHRESH = 5;
const NFULNL_CFG_CMD_BIND = 1;
const NFULNL_CFG_CMD_UNBIND = 2;
const NFULNL_COPY_PACKET = 2;

const NFULA_IFINDEX_INDEV = 4;
const NFULA_IFINDEX_OUTDEV = 5;
const NFULA_PAYLOAD = 9;
const NFULA_PREFIX = 10;
const NFULA_UID = 11;
const NFULA_GID = 14;
const NFULA_PACKET_HDR = 1;

export class NflogError extends Error {
  override name = "NflogError";
}

export interface NflogPacket {
  /** The rule's --nflog-prefix. */
  prefix: string;
  uid?: number;
  gid?: number;
  inIfindex?: number;
  outIfindex?: number;
  /** Layer 3 protocol (ETH_P_IP 0x0800, ETH_P_IPV6 0x86dd) when known. */
  hwProtocol?: number;
  /** First bytes of the packet (--nflog-size). */
  payload?: Uint8Array;
}

const align4 = (n: number) => (n + 3) & ~3;

function attr(type: number, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(align4(4 + data.length));
  const v = new DataView(out.buffer);
  v.setUint16(0, 4 + data.length, true);
  v.setUint16(2, type, true);
  out.set(data, 4);
  return out;
}

/** One nfnetlink_log config request (NLM_F_ACK). */
export function encodeConfig(seq: number, family: number, group: number, attrs: Uint8Array[]): Uint8Array {
  const body = attrs.reduce((n, a) => n + a.length, 0);
  const out = new Uint8Array(16 + 4 + body);
  const v = new DataView(out.buffer);
  v.setUint32(0, out.length, true);
  v.setUint16(4, (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG, true);
  v.setUint16(6, NLM_F_REQUEST | NLM_F_ACK, true);
  v.setUint32(8, seq, true);
  v.setUint32(12, 0, true);
  out[16] = family;
  out[17] = 0; // NFNETLINK_V0
  v.setUint16(18, group, false);
  let off = 20;
  for (const a of attrs) {
    out.set(a, off);
    off += a.length;
  }
  return out;
}

/** The config sequence for a group: unbind (ignore errors), bind, copy whole packets, flush per packet. */
export function bindGroupMessages(group: number, firstSeq: number): { seq: number; msg: Uint8Array; mayFail: boolean }[] {
  const mode = new Uint8Array(6);
  new DataView(mode.buffer).setUint32(0, 0xffff, false);
  mode[4] = NFULNL_COPY_PACKET;
  const qthresh = new Uint8Array(4);
  new DataView(qthresh.buffer).setUint32(0, 1, false);
  return [
    { seq: firstSeq, msg: encodeConfig(firstSeq, 0, group, [attr(NFULA_CFG_CMD, Uint8Array.of(NFULNL_CFG_CMD_UNBIND))]), mayFail: true },
    { seq: firstSeq + 1, msg: encodeConfig(firstSeq + 1, 0, group, [attr(NFULA_CFG_CMD, Uint8Array.of(NFULNL_CFG_CMD_BIND))]), mayFail: false },
    { seq: firstSeq + 2, msg: encodeConfig(firstSeq + 2, 0, group, [attr(NFULA_CFG_MODE, mode)]), mayFail: false },
    { seq: firstSeq + 3, msg: encodeConfig(firstSeq + 3, 0, group, [attr(NFULA_CFG_QTHRESH, qthresh)]), mayFail: false },
  ];
}

export type NetlinkMessage = { kind: "packet"; packet: NflogPacket } | { kind: "ack"; seq: number; errno: number } | { kind: "other"; type: number };

/** Decode every netlink message in a datagram (truncated trailing data is ignored). */
export function decodeMessages(buf: Uint8Array): NetlinkMessage[] {
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: NetlinkMessage[] = [];
  let off = 0;
  while (off + 16 <= buf.length) {
    const len = v.getUint32(off, true);
    if (len < 16 || off + len > buf.length) break;
    const type = v.getUint16(off + 4, true);
    const seq = v.getUint32(off + 8, true);
    if (type === NLMSG_ERROR && len >= 20) out.push({ kind: "ack", seq, errno: -v.getInt32(off + 16, true) });
    else if (type === ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET)) out.push({ kind: "packet", packet: decodePacket(buf.subarray(off + 20, off + len)) });
    else out.push({ kind: "other", type });
    off += align4(len);
  }
  return out;
}

function decodePacket(attrs: Uint8Array): NflogPacket {
  const v = new DataView(attrs.buffer, attrs.byteOffset, attrs.byteLength);
  const p: NflogPacket = { prefix: "" };
  let off = 0;
  while (off + 4 <= attrs.length) {
    const len = v.getUint16(off, true);
    const type = v.getUint16(off + 2, true) & 0x3fff;
    if (len < 4 || off + len > attrs.length) break;
    const data = attrs.subarray(off + 4, off + len);
    const be32 = () => (data.length >= 4 ? new DataView(data.buffer, data.byteOffset, 4).getUint32(0, false) : undefined);
    switch (type) {
      case NFULA_PACKET_HDR:
        if (data.length >= 2) p.hwProtocol = (data[0]! << 8) | data[1]!;
        break;
      case NFULA_PREFIX: {
        const nul = data.indexOf(0);
        p.prefix = new TextDecoder().decode(nul >= 0 ? data.subarray(0, nul) : data);
        break;
      }
      case NFULA_UID:
        p.uid = be32();
        break;
      case NFULA_GID:
        p.gid = be32();
        break;
      case NFULA_IFINDEX_INDEV:
        p.inIfindex = be32();
        break;
      case NFULA_IFINDEX_OUTDEV:
        p.outIfindex = be32();
        break;
      case NFULA_PAYLOAD:
        p.payload = data.slice();
        break;
    }
    off += align4(len);
  }
  return p;
}

type Fn = (...args: unknown[]) => unknown;
interface Libc {
  socket: Fn;
  bind: Fn;
  send: Fn;
  recv: Fn;
  close: Fn;
  setsockopt: Fn;
  __errno_location: Fn;
  if_indextoname: Fn;
}

const LIBC_NAMES = ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "libc.so"];

function openLibc(): { libc: Libc; ffi: typeof import("bun:ffi") } {
  if (process.platform !== "linux") throw new NflogError("NFLOG is only available on Linux");
  const ffi = require("bun:ffi") as typeof import("bun:ffi");
  const T = ffi.FFIType;
  for (const name of LIBC_NAMES) {
    try {
      const lib = ffi.dlopen(name, {
        socket: { args: [T.i32, T.i32, T.i32], returns: T.i32 },
        bind: { args: [T.i32, T.ptr, T.u32], returns: T.i32 },
        send: { args: [T.i32, T.ptr, T.u64, T.i32], returns: T.i64 },
        recv: { args: [T.i32, T.ptr, T.u64, T.i32], returns: T.i64 },
        close: { args: [T.i32], returns: T.i32 },
        setsockopt: { args: [T.i32, T.i32, T.i32, T.ptr, T.u32], returns: T.i32 },
        __errno_location: { args: [], returns: T.ptr },
        if_indextoname: { args: [T.u32, T.ptr], returns: T.ptr },
      });
      return { libc: lib.symbols as unknown as Libc, ffi };
    } catch {
      // next libc name
    }
  }
  throw new NflogError("cannot load libc for NFLOG");
}

/** A bound NFLOG group. Every call is non-blocking. */
export class NflogSocket {
  private readonly buf = new Uint8Array(65536);
  private closed = false;
  /** Datagrams the kernel dropped because the receive buffer was full (ENOBUFS seen). */
  overruns = 0;

  private constructor(
    private readonly fd: number,
    private readonly libc: Libc,
    private readonly ffi: typeof import("bun:ffi"),
  ) {}

  private errno(): number {
    return this.ffi.read.i32(this.libc.__errno_location() as import("bun:ffi").Pointer, 0);
  }

  /** Open, bind and configure group `group`; waits (asynchronously) for the kernel's acks. */
  static async open(group: number, opts: { ackTimeoutMs?: number; sleep?: (ms: number) => Promise<unknown> } = {}): Promise<NflogSocket> {
    const { libc, ffi } = openLibc();
    const fd = Number(libc.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER));
    const s = new NflogSocket(fd, libc, ffi);
    if (fd < 0) throw new NflogError(`socket(AF_NETLINK, NETLINK_NETFILTER) failed: errno ${s.errno()}`);
    try {
      const sa = new Uint8Array(12);
      new DataView(sa.buffer).setUint16(0, AF_NETLINK, true);
      if (Number(libc.bind(fd, ffi.ptr(sa), 12)) !== 0) throw new NflogError(`bind(netlink) failed: errno ${s.errno()}`);
      const rcv = new Int32Array([1 << 20]);
      libc.setsockopt(fd, SOL_SOCKET, SO_RCVBUF, ffi.ptr(rcv), 4);
      const sleep = opts.sleep ?? ((ms: number) => new Promise((r) => setTimeout(r, ms)));
      for (const m of bindGroupMessages(group, 1)) {
        if (Number(libc.send(fd, ffi.ptr(m.msg), m.msg.length, 0)) < 0) throw new NflogError(`send(nfnetlink config) failed: errno ${s.errno()}`);
        const errno = await s.awaitAck(m.seq, opts.ackTimeoutMs ?? 2000, sleep);
        if (errno !== 0 && !m.mayFail) {
          throw new NflogError(
            `binding NFLOG group ${group} failed: errno ${errno}${errno === 1 ? " (EPERM: needs CAP_NET_ADMIN)" : errno === 16 ? " (EBUSY: another process reads this group)" : ""}`,
          );
        }
      }
      return s;
    } catch (e) {
      s.close();
      throw e;
    }
  }

  private async awaitAck(seq: number, timeoutMs: number, sleep: (ms: number) => Promise<unknown>): Promise<number> {
    for (let waited = 0; waited <= timeoutMs; waited += 5) {
      for (const m of this.receive()) if (m.kind === "ack" && m.seq === seq) return m.errno;
      await sleep(5);
    }
    throw new NflogError(`no answer from the kernel to NFLOG config message ${seq}`);
  }

  /** Everything queued right now (never blocks). */
  receive(): NetlinkMessage[] {
    const out: NetlinkMessage[] = [];
    while (!this.closed) {
      const n = Number(this.libc.recv(this.fd, this.ffi.ptr(this.buf), this.buf.length, MSG_DONTWAIT));
      if (n > 0) {
        out.push(...decodeMessages(this.buf.subarray(0, n)));
        continue;
      }
      if (n === 0) break;
      const e = this.errno();
      if (e === ENOBUFS) {
        this.overruns++;
        continue;
      }
      if (e !== EAGAIN) throw new NflogError(`recv(NFLOG) failed: errno ${e}`);
      break;
    }
    return out;
  }

  /** Packets queued right now. */
  drain(): NflogPacket[] {
    return this.receive().flatMap((m) => (m.kind === "packet" ? [m.packet] : []));
  }

  /** Interface name of an ifindex in this network namespace (if_indextoname). */
  interfaceName(index: number): string | undefined {
    const name = new Uint8Array(16);
    if (!this.libc.if_indextoname(index, this.ffi.ptr(name))) return undefined;
    const nul = name.indexOf(0);
    return new TextDecoder().decode(name.subarray(0, nul < 0 ? 16 : nul));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.libc.close(this.fd);
  }
}
