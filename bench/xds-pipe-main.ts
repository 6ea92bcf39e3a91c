// The floor for bench/xds.ts: a plain byte pipe (UDS -> TCP, both directions, node:net with
// backpressure), no HTTP/2 and no gRPC, in its own Bun process. Whatever the relay costs above
// this is ours; what this costs is the price of a third process moving the bytes at all.
// Env: PIPE_SOCKET (UDS path), PIPE_UPSTREAM (port on 127.0.0.1). Prints "READY".

import net from "node:net";

const upstreamPort = Number(process.env.PIPE_UPSTREAM);
const server = net.createServer((down) => {
  const up = net.connect(upstreamPort, "127.0.0.1");
  const pipe = (from: net.Socket, to: net.Socket) => {
    from.on("data", (b) => {
      if (!to.write(b)) from.pause();
    });
    to.on("drain", () => from.resume());
    from.on("end", () => to.end());
    from.on("error", () => to.destroy());
  };
  pipe(down, up);
  pipe(up, down);
});
server.listen(process.env.PIPE_SOCKET!, () => process.stdout.write("READY\n"));
process.on("SIGTERM", () => process.exit(0));
