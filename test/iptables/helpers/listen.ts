// Test helper: a blocking TCP listener via libc (so it can set IP_TRANSPARENT for TPROXY).
// argv: <port> [transparent|v6]. Prints "ready", then one JSON line per connection
// {local, peer, orig} and sends the same JSON to the client.
import { dlopen, FFIType as T, ptr } from "bun:ffi";
import { OriginalDstReader, parseSockaddr } from "../../../src/iptables/origdst.ts";

const port = Number(process.argv[2]);
const transparent = process.argv[3] === "transparent";
const v6 = process.argv[3] === "v6";
const lib = dlopen("libc.so.6", {
  socket: { args: [T.i32, T.i32, T.i32], returns: T.i32 },
  setsockopt: { args: [T.i32, T.i32, T.i32, T.ptr, T.u32], returns: T.i32 },
  bind: { args: [T.i32, T.ptr, T.u32], returns: T.i32 },
  listen: { args: [T.i32, T.i32], returns: T.i32 },
  accept: { args: [T.i32, T.ptr, T.ptr], returns: T.i32 },
  getsockname: { args: [T.i32, T.ptr, T.ptr], returns: T.i32 },
  getpeername: { args: [T.i32, T.ptr, T.ptr], returns: T.i32 },
  send: { args: [T.i32, T.ptr, T.u64, T.i32], returns: T.i64 },
  close: { args: [T.i32], returns: T.i32 },
}).symbols;
const one = new Int32Array([1]);
const fd = lib.socket(v6 ? 10 : 2, 1, 0);
lib.setsockopt(fd, 1, 2, ptr(one), 4); // SO_REUSEADDR
if (transparent && lib.setsockopt(fd, 0, 19, ptr(one), 4) !== 0) throw new Error("IP_TRANSPARENT failed");
// sockaddr_in (16 bytes) or sockaddr_in6 (28 bytes, in6addr_any): family, big-endian port.
const sa = new Uint8Array(v6 ? 28 : 16);
sa[0] = v6 ? 10 : 2;
sa[2] = port >> 8;
sa[3] = port & 0xff;
if (lib.bind(fd, ptr(sa), sa.length) !== 0 || lib.listen(fd, 16) !== 0) throw new Error(`cannot listen on ${port}`);
console.log("ready");
const reader = new OriginalDstReader();
const addrOf = (fn: (fd: number, p: unknown, l: unknown) => number, c: number) => {
  const b = new Uint8Array(28);
  const l = new Uint32Array([28]);
  fn(c, ptr(b), ptr(l));
  const a = parseSockaddr(b);
  return a ? `${a.address}:${a.port}` : null;
};
for (;;) {
  const c = lib.accept(fd, null, null);
  if (c < 0) continue;
  const orig = reader.read(c, v6);
  const line = JSON.stringify({
    local: addrOf(lib.getsockname as never, c),
    peer: addrOf(lib.getpeername as never, c),
    orig: orig ? `${orig.address}:${orig.port}` : null,
    listener: port,
  });
  console.log(line);
  const data = new TextEncoder().encode(line + "\n");
  lib.send(c, ptr(data), data.length, 0);
  lib.close(c);
}
