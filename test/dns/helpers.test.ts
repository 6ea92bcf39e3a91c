// The test upstream's UDP+TCP pair: an ephemeral UDP port whose TCP twin is taken must not fail
// the suite (it did, with EADDRINUSE, in 2 of 16 full runs): the pair is released and retried.

import { expect, test } from "bun:test";
import { bindPair } from "./helpers.ts";

test("a UDP port whose TCP twin is taken is released and the pair retried", async () => {
  const squatter = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const taken = squatter.port;
  const udpPorts: number[] = [];
  const closed: number[] = [];
  try {
    const { udp, tcp } = await bindPair(
      0,
      async (port) => {
        // First attempt: the port whose TCP side is taken; later attempts: a fresh ephemeral one.
        const s = await Bun.udpSocket({ hostname: "127.0.0.1", port: udpPorts.length === 0 ? taken : port });
        udpPorts.push(s.port);
        return {
          port: s.port,
          close: () => {
            closed.push(s.port);
            s.close();
          },
        };
      },
      (port) => Bun.listen({ hostname: "127.0.0.1", port, socket: { data() {} } }),
    );
    expect(udpPorts[0]).toBe(taken);
    expect(closed).toEqual([taken]);
    expect(udp.port).not.toBe(taken);
    expect(tcp.port).toBe(udp.port);
    udp.close();
    tcp.stop(true);
  } finally {
    squatter.stop(true);
  }
});

test("a fixed port is tried once and the error names the problem", async () => {
  const squatter = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  let tries = 0;
  try {
    await expect(
      bindPair(
        squatter.port,
        async (port) => {
          tries++;
          const s = await Bun.udpSocket({ hostname: "127.0.0.1", port });
          return { port: s.port, close: () => s.close() };
        },
        (port) => Bun.listen({ hostname: "127.0.0.1", port, socket: { data() {} } }),
      ),
    ).rejects.toThrow(/no port free for both UDP and TCP/);
    expect(tries).toBe(1);
  } finally {
    squatter.stop(true);
  }
});
