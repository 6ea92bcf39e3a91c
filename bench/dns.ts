// DNS proxy benchmark: queries per second with 16 queries in flight and p50/p99 latency, for
// table hits and forwarded names, beside a Bun UDP echo server measured in the same run (the
// machine's floor for a UDP request/response through Bun). Servers run in child processes
// (`bun bench/dns.ts --serve <echo|upstream|proxy> [upstreamPort]`) so the client does not share
// their event loop.

import type { udp } from "bun";
import * as packet from "dns-packet";
import { proxyDomain } from "../src/dns/althosts.ts";
import { nameInfo } from "../src/dns/nametable.ts";
import { DnsProxy } from "../src/dns/proxy.ts";
import { silentLogger } from "../src/lib/log.ts";
import { newRegistry } from "../src/lib/metrics.ts";

const IN_FLIGHT = 16;
const WARMUP_MS = 1000;
const MEASURE_MS = 3000;

interface Result {
  name: string;
  qps: number;
  p50: number;
  p99: number;
  lost: number;
}

async function serve(kind: string, upstreamPort: number): Promise<void> {
  let port: number;
  if (kind === "echo" || kind === "upstream") {
    const s = await Bun.udpSocket({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data(sock, data, p, addr) {
          if (kind === "upstream") data[2]! |= 0x80; // a valid, empty NOERROR response
          sock.send(data, p, addr);
        },
      },
    });
    port = s.port;
  } else {
    const table: Record<string, ReturnType<typeof nameInfo>> = {};
    for (let i = 0; i < 1000; i++) {
      table[`svc${i}.ns${i % 10}.svc.cluster.local`] = nameInfo({
        ips: [`10.${i >> 8}.${i & 255}.1`],
        registry: "Kubernetes",
        shortname: `svc${i}`,
        namespace: `ns${i % 10}`,
      });
    }
    table["productpage.ns1.svc.cluster.local"] = nameInfo({ ips: ["10.9.9.9"], registry: "Kubernetes", shortname: "productpage", namespace: "ns1" });
    const proxy = new DnsProxy({
      listen: [{ host: "127.0.0.1", port: 0 }],
      upstreams: [{ host: "127.0.0.1", port: upstreamPort }],
      search: ["ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"],
      proxyDomain: proxyDomain("ns1", "ns1.svc.cluster.local"),
      respondBeforeSync: false,
      forwardParallel: false,
      forwardTimeoutMs: 5000,
      log: silentLogger(),
      registry: newRegistry(),
    });
    await proxy.start(new AbortController().signal);
    proxy.setTable({ table });
    port = proxy.addresses()[0]!.port;
  }
  process.stdout.write(JSON.stringify({ port }) + "\n");
  await new Promise(() => {});
}

async function spawnServer(kind: string, upstreamPort = 0): Promise<{ port: number; kill(): void }> {
  const proc = Bun.spawn([process.execPath, import.meta.path, "--serve", kind, String(upstreamPort)], { stdout: "pipe", stderr: "inherit" });
  const reader = proc.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`bench server ${kind} exited`);
    text += new TextDecoder().decode(value);
  }
  return { port: JSON.parse(text.split("\n")[0]!).port, kill: () => proc.kill() };
}

function query(name: string): Uint8Array {
  return packet.encode({ type: "query", id: 0, flags: packet.RECURSION_DESIRED, questions: [{ type: "A", name, class: "IN" }] });
}

async function load(name: string, port: number, q: Uint8Array): Promise<Result> {
  const sent = new Float64Array(65536);
  const live = new Uint8Array(65536);
  let nextId = 1;
  let measuring = false;
  let done = false;
  let count = 0;
  let lost = 0;
  const lat: number[] = [];
  const buf = Uint8Array.from(q);
  let sock: udp.Socket<"buffer">;
  const fire = () => {
    const id = nextId;
    nextId = (nextId + 1) & 0xffff || 1;
    buf[0] = id >> 8;
    buf[1] = id & 0xff;
    sent[id] = performance.now();
    live[id] = 1;
    sock.send(buf, port, "127.0.0.1");
  };
  sock = await Bun.udpSocket({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(_s, data) {
        const id = (data[0]! << 8) | data[1]!;
        if (!live[id]) return;
        live[id] = 0;
        if (measuring) {
          count++;
          lat.push(performance.now() - sent[id]!);
        }
        if (!done) fire();
      },
    },
  });
  for (let i = 0; i < IN_FLIGHT; i++) fire();
  // Re-issue queries whose reply was lost so 16 stay in flight.
  const watchdog = setInterval(() => {
    const now = performance.now();
    for (let id = 1; id < 65536; id++) {
      if (live[id] && now - sent[id]! > 250) {
        live[id] = 0;
        lost++;
        if (!done) fire();
      }
    }
  }, 100);
  await Bun.sleep(WARMUP_MS);
  measuring = true;
  const t0 = performance.now();
  await Bun.sleep(MEASURE_MS);
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  done = true;
  clearInterval(watchdog);
  await Bun.sleep(50);
  sock.close();
  lat.sort((a, b) => a - b);
  const pct = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(lat.length * p))]! : NaN);
  return { name, qps: count / elapsed, p50: pct(0.5), p99: pct(0.99), lost };
}

export async function run(): Promise<string> {
  const echo = await spawnServer("echo");
  const upstream = await spawnServer("upstream");
  const proxy = await spawnServer("proxy", upstream.port);
  const results: Result[] = [];
  try {
    // The echo runs first and last: the floor is their mean, so drift on a busy machine shows.
    results.push(await load("Bun UDP echo (floor)", echo.port, query("productpage.ns1.svc.cluster.local")));
    results.push(await load("table hit, FQDN", proxy.port, query("productpage.ns1.svc.cluster.local")));
    results.push(await load("table hit, search expansion (CNAME + A)", proxy.port, query("productpage.ns1.ns1.svc.cluster.local")));
    results.push(await load("upstream alone (instant responder)", upstream.port, query("www.example.com")));
    results.push(await load("forwarded name (proxy -> upstream)", proxy.port, query("www.example.com")));
    results.push(await load("Bun UDP echo (floor, again)", echo.port, query("productpage.ns1.svc.cluster.local")));
  } finally {
    echo.kill();
    upstream.kill();
    proxy.kill();
  }
  const floor = (results[0]!.qps + results[results.length - 1]!.qps) / 2;
  const rows = results.map(
    (r) =>
      `| ${r.name} | ${Math.round(r.qps).toLocaleString("en-US")} | ${(r.qps / floor).toFixed(2)}x | ${(r.p50 * 1000).toFixed(0)} µs | ${(r.p99 * 1000).toFixed(0)} µs | ${r.lost} |`,
  );
  return [
    "## DNS proxy",
    "",
    `UDP queries with ${IN_FLIGHT} in flight for ${MEASURE_MS / 1000} s each (after ${WARMUP_MS} ms warm-up); servers in child Bun processes, table of 1001 services. Target for table hits: >= 0.65x the echo floor, p99 <= 1 ms.`,
    "",
    "| Scenario | Queries/s | vs echo | p50 | p99 | lost |",
    "|---|---:|---:|---:|---:|---:|",
    ...rows,
    "",
  ].join("\n");
}

if (import.meta.main) {
  const i = process.argv.indexOf("--serve");
  if (i >= 0) await serve(process.argv[i + 1]!, Number(process.argv[i + 2] ?? 0));
  else console.log(await run());
}
