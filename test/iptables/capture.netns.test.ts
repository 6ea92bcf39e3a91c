// Real packets through the default sidecar capture (nft backend), in namespaces this test creates:
// outbound redirect to 15001 with SO_ORIGINAL_DST, proxy UID not redirected, inbound to 15006,
// excluded ports and CIDRs pass, a second apply changes nothing, --cleanup-only removes it all.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { describeRequiring } from "../support/requires.ts";
import { connect, createPair, iptables, parse, saveState, startHelper, type Helper, type Pair } from "./netns.ts";

describeRequiring(
  { root: true, tools: ["ip", "iptables-nft", "iptables-nft-save", "setpriv"], apt: ["iproute2", "iptables", "util-linux"] },
  "default capture on real packets (nft)",
  () => {
    let pair: Pair;
    const helpers: Helper[] = [];
    const capture = (p: Pair) => [
      "-p",
      "15001",
      "-z",
      "15006",
      "-u",
      "1337",
      "-m",
      "REDIRECT",
      "-i",
      "*",
      "-x",
      `${p.peerIP2}/32`,
      "-b",
      "*",
      "-d",
      "15020",
      "-o",
      "8081",
    ];
    let firstApply: { code: number; out: string; err: string };

    beforeAll(async () => {
      pair = createPair(11);
      firstApply = iptables(pair.pod, capture(pair), { FORCE_IPTABLES_BINARY: "nft" });
      for (const port of [15001, 15006, 15020]) helpers.push(await startHelper(pair.pod, "listen.ts", [String(port)]));
      for (const port of [8080, 8081]) helpers.push(await startHelper(pair.peer, "listen.ts", [String(port)]));
    });
    afterAll(async () => {
      for (const h of helpers) await h.kill();
      pair?.destroy();
    });

    test("apply succeeds and installs the ISTIO chains", () => {
      expect(firstApply.code).toBe(0);
      const state = saveState(pair.pod);
      for (const chain of ["ISTIO_INBOUND", "ISTIO_IN_REDIRECT", "ISTIO_OUTPUT", "ISTIO_REDIRECT"]) expect(state).toContain(`:${chain} -`);
    });

    test("outbound TCP from an application UID lands on 15001 with the original destination", () => {
      const r = parse(connect(pair.pod, pair.peerIP, 8080, 1000));
      expect(r.listener).toBe(15001);
      expect(r.orig).toBe(`${pair.peerIP}:8080`);
    });

    test("outbound TCP from the proxy UID 1337 is not redirected", () => {
      const r = parse(connect(pair.pod, pair.peerIP, 8080, 1337));
      expect(r.listener).toBe(8080);
      expect(r.local).toBe(`${pair.peerIP}:8080`);
    });

    test("excluded outbound port and excluded CIDR pass untouched", () => {
      expect(parse(connect(pair.pod, pair.peerIP, 8081, 1000)).listener).toBe(8081);
      const r = parse(connect(pair.pod, pair.peerIP2, 8080, 1000));
      expect(r.listener).toBe(8080);
      expect(r.local).toBe(`${pair.peerIP2}:8080`);
    });

    test("inbound connections from the peer land on 15006 (excluded inbound port goes straight through)", () => {
      const r = parse(connect(pair.peer, pair.podIP, 9090));
      expect(r.listener).toBe(15006);
      expect(r.orig).toBe(`${pair.podIP}:9090`);
      expect(r.peer.startsWith(`${pair.peerIP}:`)).toBe(true);
      expect(parse(connect(pair.peer, pair.podIP, 15020)).listener).toBe(15020);
    });

    test("a second apply changes nothing", () => {
      const before = saveState(pair.pod);
      const again = iptables(pair.pod, capture(pair), { FORCE_IPTABLES_BINARY: "nft" });
      expect(again.code).toBe(0);
      expect(again.out).toContain("reconciliation not needed");
      expect(saveState(pair.pod)).toBe(before);
    });

    test("--cleanup-only leaves no ISTIO_ chain or jump, and traffic flows directly again", () => {
      const r = iptables(pair.pod, ["--cleanup-only"], { FORCE_IPTABLES_BINARY: "nft" });
      expect(r.code).toBe(0);
      expect(saveState(pair.pod)).not.toContain("ISTIO_");
      expect(parse(connect(pair.pod, pair.peerIP, 8080, 1000)).listener).toBe(8080);
    });
  },
);
