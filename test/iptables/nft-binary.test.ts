// The compiled binary in nftables mode, inside a namespace this test creates (so host facts are
// fixed: one IPv4 address, no IPv6): `--dry-run` prints Istio's `empty` golden byte for byte and
// touches nothing; a real run installs our table and `--cleanup-only` removes it.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { sandbox, type Sandbox } from "../support/binary.ts";
import { describeRequiring } from "../support/requires.ts";
import { createPair, inetTables, sh, type Pair } from "./netns.ts";
import { VECTORS } from "../conformance/vectors.ts";

const golden = join(VECTORS, "nftables/golden/empty.golden");

describeRequiring({ root: true, tools: ["nft", "ip"], apt: ["nftables", "iproute2"] }, "dist/agent iptables --native-nftables", () => {
  let box: Sandbox;
  let p: Pair;
  const agent = (args: string[]) => sh(["ip", "netns", "exec", p.pod, box.bin, "iptables", "--native-nftables", "-u", "1337", "-g", "1337", ...args]);
  beforeAll(() => {
    box = sandbox("agent-nft-");
    p = createPair(27);
  });
  afterAll(() => {
    p?.destroy();
    box?.cleanup();
  });

  test("--dry-run prints the `empty` golden and leaves the namespace without tables", () => {
    const r = agent(["--dry-run"]);
    expect({ code: r.code, err: r.code === 0 ? "" : r.err }).toEqual({ code: 0, err: "" });
    expect(r.out.trim()).toBe(readFileSync(golden, "utf8").trim());
    expect(inetTables(p.pod)).toEqual([]);
  });

  test("a real run installs istio-proxy-nat; --cleanup-only removes it", () => {
    const r = agent([]);
    expect({ code: r.code, err: r.code === 0 ? "" : r.err }).toEqual({ code: 0, err: "" });
    expect(inetTables(p.pod)).toEqual(["istio-proxy-nat"]);
    const c = agent(["--cleanup-only"]);
    expect({ code: c.code, err: c.code === 0 ? "" : c.err }).toEqual({ code: 0, err: "" });
    expect(inetTables(p.pod)).toEqual([]);
  });
});
