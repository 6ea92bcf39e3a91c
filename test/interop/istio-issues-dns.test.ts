// Istio agent issues, side by side (docs/compat.md, "Istio agent issues"): the DNS proxy.
// Each agent runs in a mount namespace of its own whose /etc/resolv.conf names our upstream
// resolver (a private loopback address at port 53, so root), with DNS capture on and the name
// table from istiod-lite through the stand-in Envoy's xDS stream, as in the status differential.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeRequiring } from "../support/requires.ts";
import { DIST_AGENT, requireBinary } from "../support/binary.ts";
import { freePort } from "../e2e/pod.ts";
import { dig, startUpstream, type TestUpstream } from "../dns/helpers.ts";
import { privateLoopbackNet } from "../faults/dns-pod.ts";
import { interopUnmet, PILOT_AGENT } from "./support/go-build.ts";
import { startIstiodLite, type IstiodLite } from "./support/istiod-lite.ts";
import { podPorts, startPodAgent, waitFor } from "./support/pod-run.ts";

describeRequiring(
  { root: true, tools: ["dig", "unshare", "mount"], apt: ["dnsutils", "util-linux", "mount"], check: interopUnmet },
  "Istio agent issues: DNS proxy (Istio's pilot-agent vs ours)",
  () => {
    let lite: IstiodLite;
    let upstream: TestUpstream;
    let resolv: string;
    let work: string;
    beforeAll(async () => {
      lite = await startIstiodLite("");
      upstream = await startUpstream({ host: `${privateLoopbackNet()}.1`, port: 53 });
      work = mkdtempSync(join(tmpdir(), "agent-issues-dns-"));
      resolv = join(work, "resolv.conf");
      writeFileSync(resolv, `nameserver ${upstream.host}\n`);
    }, 90_000);
    afterAll(async () => {
      upstream?.close();
      await lite?.stop();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    async function run(bin: string, body: (port: number, log: () => string) => Promise<void>): Promise<void> {
      const port = await freePort();
      const pod = await startPodAgent({
        bin,
        lite,
        ports: await podPorts(),
        env: { ISTIO_META_DNS_CAPTURE: "true", DNS_PROXY_ADDR: `127.0.0.1:${port}`, INTEROP_ENVOY_XDS: "sotw" },
        prefix: ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', resolv],
      });
      try {
        // Sentinel: the name table has arrived (both agents answer only after it, as Istio's).
        const synced = await waitFor(async () => (await pod.get("/debug/ndsz")).status === 200, 30_000);
        if (!synced) throw new Error(`${bin}: no name table (exit ${pod.proc.exitCode}):\n${pod.log().slice(-3000)}`);
        await body(port, pod.log);
      } finally {
        await pod.stop();
      }
    }

    // istio#61371 (open): the proxy's upstream client reads UDP answers into miekg/dns's default
    // 512-byte buffer when the application's query has no EDNS0. An upstream that answers with
    // more than 512 bytes anyway (its own cache, a non-compliant server: `giant-raw.` here, 64 A
    // records, never truncated) fails to unpack ("dns: buffer size too small") and the
    // application gets SERVFAIL although the upstream answered. Ours reads the whole datagram and
    // truncates the answer for the client (TC set, at most 512 bytes), so it retries over TCP.
    test("#61371 Istio: an upstream answer over 512 bytes to a query without EDNS0 becomes SERVFAIL", async () => {
      await run(PILOT_AGENT, async (port, log) => {
        const before = upstream.received.udp;
        const r = await dig(port, "giant-raw.", "A", ["+noedns", "+ignore"]);
        expect(upstream.received.udp).toBeGreaterThan(before); // the upstream was asked and answered
        expect(r.status).toBe("SERVFAIL");
        expect(r.answers).toEqual([]);
        // The reported reason, in Istio's own log line.
        expect(log()).toContain("upstream failure: dns: buffer size too small");
      });
    }, 90_000);

    test("#61371 ours: the same answer is truncated for the client (TC, 512 bytes), and complete over TCP", async () => {
      requireBinary();
      await run(DIST_AGENT, async (port) => {
        const r = await dig(port, "giant-raw.", "A", ["+noedns", "+ignore"]);
        expect(r.status).toBe("NOERROR");
        expect(r.flags).toContain("tc");
        expect(r.size).toBeLessThanOrEqual(512);
        expect(r.answers.length).toBeGreaterThan(0);
        const full = await dig(port, "giant-raw.", "A", ["+noedns", "+tcp"]);
        expect(full.status).toBe("NOERROR");
        expect(full.answers.length).toBe(64);
      });
    }, 90_000);
  },
);
