// Load: 200,000 DNS queries answered from istiod's NameTable by the compiled agent's DNS proxy, on
// loopback over UDP, at most 64 in flight. Every answer must be the table's address for the name
// asked (literals below, parsed by a reader written here, not the agent's), the agent's RSS must
// stay bounded, and the status port must answer throughout (status-prober.ts). dig, an
// independent client, checks a name before and after. FAULTS_LOAD_DNS sets the count.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import dgram from "node:dgram";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeIstiod, makeTestPki, type TestPki } from "../support/fake-istiod.ts";
import { describeRequiring } from "../support/requires.ts";
import { freePort, startPod, until, type Pod } from "../e2e/pod.ts";
import { EnvoyClient, LDS } from "../xds/harness.ts";
import { dig } from "../dns/helpers.ts";
import { nameInfo } from "../../src/dns/nametable.ts";
import { nameTableIstiod } from "./dns-pod.ts";
import { expectStatusBounds, startStatusProber } from "./status-prober.ts";

const QUERIES = Number(process.env.FAULTS_LOAD_DNS ?? 200_000);
const IN_FLIGHT = 64;
const NAMES = 256;
const RSS_LIMIT_MIB = 300;
/** Name i of the table and its address: literals, not derived from the agent. */
const nameOf = (i: number) => `svc${i}.demo.svc.cluster.local`;
const ipOf = (i: number) => `10.77.${i >> 8}.${i & 255}`;

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** An A query for `name` with `id`, recursion desired. */
function query(id: number, name: string): Buffer {
  const labels = name.split(".").map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  const header = Buffer.from([id >> 8, id & 255, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([header, ...labels, Buffer.from([0, 0, 1, 0, 1])]);
}

/** Skip a (possibly compressed) name at `pos`; returns the offset after it. */
function skipName(b: Buffer, pos: number): number {
  for (;;) {
    const len = b[pos]!;
    if (len === 0) return pos + 1;
    if ((len & 0xc0) === 0xc0) return pos + 2;
    pos += len + 1;
  }
}

/** id, rcode and the A records of a response. */
function answerOf(b: Buffer): { id: number; rcode: number; a: string[] } {
  const id = b.readUInt16BE(0);
  const rcode = b[3]! & 0x0f;
  const qd = b.readUInt16BE(4);
  const an = b.readUInt16BE(6);
  let pos = 12;
  for (let i = 0; i < qd; i++) pos = skipName(b, pos) + 4;
  const a: string[] = [];
  for (let i = 0; i < an; i++) {
    pos = skipName(b, pos);
    const type = b.readUInt16BE(pos);
    const len = b.readUInt16BE(pos + 8);
    if (type === 1 && len === 4) a.push([...b.subarray(pos + 10, pos + 14)].join("."));
    pos += 10 + len;
  }
  return { id, rcode, a };
}

describeRequiring({ tools: ["dig", "openssl"], apt: ["dnsutils", "openssl"] }, "load: DNS table hits (compiled agent)", () => {
  let work: string;
  let pki: TestPki;
  let istiod: FakeIstiod;
  let pod: Pod;
  let port: number;
  let envoy: EnvoyClient;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "agent-faults-loaddns-"));
    pki = makeTestPki(join(work, "pki"));
    const table: Record<string, unknown> = {};
    for (let i = 0; i < NAMES; i++) table[nameOf(i)] = nameInfo({ ips: [ipOf(i)], registry: "Kubernetes", shortname: `svc${i}`, namespace: "demo" });
    istiod = await nameTableIstiod(pki, table);
    port = await freePort();
    pod = await startPod({
      env: {
        DISABLE_ENVOY: "true",
        CA_PROVIDER: "local",
        ISTIOD_SAN: "istiod.istio-system.svc",
        ISTIO_META_DNS_CAPTURE: "true",
        DNS_PROXY_ADDR: `127.0.0.1:${port}`,
      },
      proxyConfig: { discoveryAddress: istiod.address, controlPlaneAuthPolicy: "MUTUAL_TLS" },
      files: { "var/run/secrets/tokens/istio-token": "t\n", "var/run/secrets/istio/root-cert.pem": readFileSync(pki.caCert, "utf8") },
    });
    await until(pod, "XDS socket", () => (existsSync(pod.path("etc/istio/proxy/XDS")) ? true : undefined));
    // The NameTable rides the upstream connection Envoy's first request opens.
    envoy = new EnvoyClient(pod.path("etc/istio/proxy/XDS"));
    envoy.send({ typeUrl: LDS });
    await until(pod, `${nameOf(0)} answered from the NameTable`, async () => ((await dig(port, nameOf(0))).data.includes(ipOf(0)) ? true : undefined), 30_000);
  }, 60_000);

  afterAll(async () => {
    envoy?.close();
    pod?.kill();
    await istiod?.stop();
    pod?.box.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  test(`${QUERIES} table hits over UDP (${IN_FLIGHT} in flight): every answer right, RSS < ${RSS_LIMIT_MIB} MiB, the status port answering`, async () => {
    const probe = await startStatusProber(pod.statusPort);
    const sock = dgram.createSocket("udp4");
    await new Promise<void>((r) => sock.bind(0, "127.0.0.1", () => r()));
    // A lean client (the test process shares the CPU with the agent): one prepared query per name,
    // ids rewritten in place; IN_FLIGHT slots each keep one query outstanding; one sweep timer
    // resends what went unanswered for 2 s.
    const templates = Array.from({ length: NAMES }, (_, i) => query(0, nameOf(i)));
    const slotName = new Int32Array(IN_FLIGHT);
    const slotSentAt = new Float64Array(IN_FLIGHT);
    const slotBusy = new Uint8Array(IN_FLIGHT);
    /** Bumped per query of a slot: the id is slot + IN_FLIGHT × generation, so a late answer to a slot's earlier query is told apart. */
    const slotGen = new Uint16Array(IN_FLIGHT);
    const GENERATIONS = 65536 / IN_FLIGHT;
    const wrong: string[] = [];
    let retries = 0;
    let sent = 0;
    let answered = 0;
    let maxRss = 0;
    const rss0 = rssMiB(pod.agent.proc.pid);
    const send = (slot: number) => {
      const pkt = Buffer.from(templates[slotName[slot]!]!);
      pkt.writeUInt16BE(slot + IN_FLIGHT * slotGen[slot]!, 0);
      slotSentAt[slot] = performance.now();
      sock.send(pkt, port, "127.0.0.1");
    };
    const next = (slot: number) => {
      if (sent >= QUERIES) return void (slotBusy[slot] = 0);
      slotName[slot] = sent++ % NAMES;
      slotGen[slot] = (slotGen[slot]! + 1) % GENERATIONS;
      slotBusy[slot] = 1;
      send(slot);
    };
    const t0 = performance.now();
    await new Promise<void>((done) => {
      sock.on("message", (msg) => {
        const ans = answerOf(msg);
        const slot = ans.id % IN_FLIGHT;
        if (!slotBusy[slot] || Math.floor(ans.id / IN_FLIGHT) !== slotGen[slot]) return; // a late or second answer
        const name = slotName[slot]!;
        if (ans.rcode !== 0 || ans.a.length !== 1 || ans.a[0] !== ipOf(name)) {
          wrong.push(`${nameOf(name)}: rcode ${ans.rcode}, ${JSON.stringify(ans.a)} (want ${ipOf(name)})`);
        }
        answered++;
        if (answered % 10_000 === 0) maxRss = Math.max(maxRss, rssMiB(pod.agent.proc.pid));
        next(slot);
        if (answered === QUERIES) done();
      });
      const sweep = setInterval(() => {
        const now = performance.now();
        for (let s = 0; s < IN_FLIGHT; s++) {
          if (slotBusy[s] && now - slotSentAt[s]! > 2000) {
            retries++;
            send(s);
          }
        }
        if (answered === QUERIES) clearInterval(sweep);
      }, 500);
      for (let s = 0; s < IN_FLIGHT; s++) next(s);
    });
    const secs = (performance.now() - t0) / 1000;
    sock.close();
    const probed = await probe.stop();
    maxRss = Math.max(maxRss, rssMiB(pod.agent.proc.pid));
    expect(wrong.slice(0, 5)).toEqual([]);
    expect(pod.exitCode()).toBeNull();
    expect(maxRss).toBeLessThan(RSS_LIMIT_MIB);
    const after = await dig(port, nameOf(NAMES - 1));
    expect(after.data).toEqual([ipOf(NAMES - 1)]);
    console.log(
      `load: ${QUERIES} DNS table hits in ${secs.toFixed(1)} s (${(QUERIES / secs).toFixed(0)}/s, ${retries} resent after 2 s), all right; agent RSS ${rss0.toFixed(0)} → max ${maxRss.toFixed(0)} MiB`,
    );
    expectStatusBounds(probed, `${QUERIES} DNS table hits`);
  }, 600_000);
});
