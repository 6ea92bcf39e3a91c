// Status-server benchmark: a merged scrape (/stats/prometheus) of a 100k-line Envoy stats page,
// beside fetching the same page directly from the (imitation) Envoy. The status server runs in
// a child Bun process so its peak RSS (VmHWM, reset before measuring) is its own. A second child
// buffers the Envoy page before answering (what Istio did before #32386) for comparison.

import { writeFileSync } from "node:fs";
import { fmt, peakRssKiB, rssKiB, summary } from "./support.ts";

const LINES = 100_000;
const RUNS = 10;

function envoyPage(): string {
  const out: string[] = [];
  for (let i = 0; out.length < LINES; i++) {
    out.push(`# TYPE envoy_cluster_upstream_rq_${i % 50}_total counter`);
    for (let j = 0; j < 9 && out.length < LINES; j++) {
      out.push(`envoy_cluster_upstream_rq_${i % 50}_total{cluster_name="outbound|8080||svc-${i}.ns-${j}.svc.cluster.local",response_code="200"} ${i * 9 + j}`);
    }
  }
  return out.join("\n") + "\n";
}

/** Child mode: serve the status server (streaming, or buffering with STATUS_BENCH_BUFFERED). */
async function child(): Promise<void> {
  const { StatusServer } = await import("../src/status/server.ts");
  const { silentLogger } = await import("../src/lib/log.ts");
  const { newRegistry } = await import("../src/lib/metrics.ts");
  const { addProcessMetrics } = await import("../src/lib/runtime-metrics.ts");
  const registry = newRegistry();
  await addProcessMetrics(registry);
  const envoyPort = Number(process.env.STATUS_BENCH_ENVOY_PORT);
  const s = new StatusServer({
    port: 0,
    hostname: "127.0.0.1",
    log: silentLogger(),
    registry,
    envoy: { adminHost: "127.0.0.1", adminPort: envoyPort, prometheusHost: "127.0.0.1", prometheusPort: envoyPort, mergeStats: true },
    probeDestination: "127.0.0.1",
  });
  if (process.env.STATUS_BENCH_BUFFERED) {
    const handle = s.handle.bind(s);
    s.handle = async (req, remote) => {
      const r = await handle(req, remote);
      return new Response(await r.text(), { status: r.status, headers: r.headers });
    };
  }
  await s.start(new AbortController().signal);
  console.log(`PORT ${s.port()}`);
  for await (const _ of Bun.stdin.stream()) {
    // keep running until the parent closes stdin
  }
  process.exit(0);
}

async function timeFetch(url: string, headers: Record<string, string>): Promise<{ ms: number; bytes: number }> {
  const t0 = performance.now();
  const r = await fetch(url, { headers, decompress: false } as RequestInit);
  let bytes = 0;
  for await (const chunk of r.body!) bytes += (chunk as Uint8Array).length;
  return { ms: performance.now() - t0, bytes };
}

async function measureChild(envoyPort: number, buffered: boolean, gzip: boolean) {
  const proc = Bun.spawn([process.execPath, import.meta.path], {
    env: { ...process.env, STATUS_BENCH_CHILD: "1", STATUS_BENCH_ENVOY_PORT: String(envoyPort), ...(buffered ? { STATUS_BENCH_BUFFERED: "1" } : {}) },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "inherit",
  });
  try {
    const reader = proc.stdout.getReader();
    let out = "";
    while (!/PORT \d+/.test(out)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`status child exited early: ${out}`);
      out += new TextDecoder().decode(value);
    }
    const url = `http://127.0.0.1:${/PORT (\d+)/.exec(out)![1]}/stats/prometheus`;
    const headers = { "accept-encoding": gzip ? "gzip" : "identity" };
    await timeFetch(url, headers); // warm-up
    Bun.gc(true);
    await Bun.sleep(100);
    const idle = rssKiB(proc.pid);
    try {
      writeFileSync(`/proc/${proc.pid}/clear_refs`, "5"); // reset VmHWM to the current RSS
    } catch {
      // older kernels: the peak then includes the warm-up
    }
    const times: number[] = [];
    let bytes = 0;
    for (let i = 0; i < RUNS; i++) {
      const r = await timeFetch(url, headers);
      times.push(r.ms);
      bytes = r.bytes;
    }
    return { time: summary(times), idle, peak: peakRssKiB(proc.pid), bytes };
  } finally {
    proc.stdin.end();
    proc.kill();
    await proc.exited;
  }
}

export async function run(): Promise<string> {
  const page = envoyPage();
  const envoy = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(page, { headers: { "content-type": "text/plain; version=0.0.4" } }) });
  try {
    const direct: number[] = [];
    await timeFetch(`http://127.0.0.1:${envoy.port}/stats/prometheus`, {});
    for (let i = 0; i < RUNS; i++) direct.push((await timeFetch(`http://127.0.0.1:${envoy.port}/stats/prometheus`, {})).ms);
    const d = summary(direct);
    const streamed = await measureChild(envoy.port!, false, false);
    const streamedGz = await measureChild(envoy.port!, false, true);
    const buffered = await measureChild(envoy.port!, true, false);
    const mib = (k: number) => fmt(k / 1024);
    const row = (name: string, m: Awaited<ReturnType<typeof measureChild>>) =>
      `| ${name} | ${fmt(m.time.median)} | ${fmt(m.time.p99)} | ${fmt(m.time.median / d.median, 2)}× | ${mib(m.idle)} | ${mib(m.peak)} | +${mib(m.peak - m.idle)} | ${fmt(m.bytes / 2 ** 20, 2)} |`;
    return [
      "## Status server: merged scrape of a 100k-line Envoy page",
      "",
      `Envoy page: ${LINES.toLocaleString("en")} lines, ${fmt(page.length / 2 ** 20, 2)} MiB; ${RUNS} scrapes each. The status server runs in a child process; RSS is that child's (idle after warm-up, peak = VmHWM over the scrapes).`,
      "",
      "| scrape | median ms | p99 ms | vs direct | idle RSS MiB | peak RSS MiB | peak − idle MiB | bytes out MiB |",
      "|---|---|---|---|---|---|---|---|",
      `| Envoy page fetched directly | ${fmt(d.median)} | ${fmt(d.p99)} | 1.00× | | | | ${fmt(page.length / 2 ** 20, 2)} |`,
      row("merged, streamed (ours)", streamed),
      row("merged, streamed, gzip", streamedGz),
      row("merged, buffered (pre-#32386 style)", buffered),
      "",
    ].join("\n");
  } finally {
    envoy.stop(true);
  }
}

if (import.meta.main) {
  if (process.env.STATUS_BENCH_CHILD) await child();
  else console.log(await run());
}
