// Ports for tests that must name a port before something listens on it (the agent's status and
// admin ports, a relay's target, a port nothing listens on). Binding port 0 and releasing it
// hands back a port from the kernel's ephemeral range, which the kernel goes on handing out: as
// the source port of the next outgoing connection or to the next listen(0), so by the time the
// test binds it, something else may hold it. These come from below that range, where the kernel
// never picks on its own, and one process never gets the same port twice.

import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** The lowest port of the kernel's ephemeral range (ip_local_port_range; Linux's default 32768). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 1024 ? low : 32768;
  } catch {
    return 32768;
  }
}

const LOW = 10000;
const HIGH = Math.max(LOW + 1000, ephemeralLow()); // exclusive
const handedOut = new Set<number>();
let next = LOW + Math.floor(Math.random() * (HIGH - LOW));

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen({ port, host: "127.0.0.1", exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/** A TCP port on 127.0.0.1 that nothing listens on now, outside the kernel's ephemeral range. */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < HIGH - LOW; tries++) {
    const port = next;
    next = next + 1 >= HIGH ? LOW : next + 1;
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    if (await bindable(port)) return port;
  }
  throw new Error(`freePort: no free port in ${LOW}-${HIGH - 1}`);
}
