// SO_PEERCRED on the XDS socket: a client running as a UID outside XDS_AUTHORIZED_UIDS is closed
// before any HTTP/2 byte, logged with pid/uid and counted; an allowed client gets the server's
// SETTINGS. In proxyless mode (DISABLE_ENVOY) the application is the client: every UID is allowed
// unless XDS_AUTHORIZED_UIDS is set. Needs root and setpriv (to run the client as another UID).

import { afterEach, expect } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describeRequiring, testRequiring } from "../support/requires.ts";
import { metricValue, startHarness, type Harness } from "./harness.ts";

const NEEDS = { root: true, tools: ["setpriv"], apt: ["util-linux"] };
let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** Start the relay with `env` and make its socket reachable for other UIDs; returns the client script. */
async function harnessWithClient(env: Record<string, string>): Promise<{ h: Harness; script: string }> {
  h = await startHarness({ env });
  for (const d of [h.root, join(h.root, "etc"), join(h.root, "etc/istio"), join(h.root, "etc/istio/proxy")]) chmodSync(d, 0o755);
  const script = join(h.root, "client.cjs");
  writeFileSync(script, CLIENT);
  chmodSync(script, 0o644);
  return { h, script };
}

const CLIENT = `
const net = require("node:net");
const s = net.connect(process.argv[2]);
let got = 0;
s.on("connect", () => s.write("PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + "\\x00\\x00\\x00\\x04\\x00\\x00\\x00\\x00\\x00"));
s.on("data", (d) => { got += d.length; s.destroy(); });
s.on("error", () => {});
s.on("close", () => { console.log(got > 0 ? "served" : "refused"); process.exit(0); });
setTimeout(() => { console.log("timeout"); process.exit(0); }, 5000);
`;

async function runClient(socket: string, script: string, asUid?: number): Promise<string> {
  const cmd =
    asUid === undefined
      ? [process.execPath, script, socket]
      : ["setpriv", `--reuid=${asUid}`, `--regid=${asUid}`, "--clear-groups", process.execPath, script, socket];
  const p = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_INSTALL_CACHE_DIR: "/tmp" } });
  const out = await new Response(p.stdout).text();
  await p.exited;
  return out.trim();
}

testRequiring(
  NEEDS,
  "a client as uid 4242 is refused, logged and counted; root is served",
  async () => {
    const { h, script } = await harnessWithClient({ XDS_AUTHORIZED_UIDS: "0,1337" });
    expect(await runClient(h.proxy.socketPath, script, 4242)).toBe("refused");
    expect(await metricValue(h.registry, "istio_agent_xds_rejected_peers")).toBe(1);
    expect(h.lines.some((l) => /rejected connection .* uid=4242/.test(l) && /pid=\d+/.test(l))).toBe(true);
    expect(await runClient(h.proxy.socketPath, script)).toBe("served");
    expect(await metricValue(h.registry, "istio_agent_xds_rejected_peers")).toBe(1);
  },
  20_000,
);

describeRequiring(NEEDS, "XDS socket peers in proxyless mode", () => {
  testRequiring(
    NEEDS,
    "DISABLE_ENVOY without XDS_AUTHORIZED_UIDS: the application's UID (4242) is served, said once at start",
    async () => {
      const { h, script } = await harnessWithClient({ DISABLE_ENVOY: "true" });
      expect(await runClient(h.proxy.socketPath, script, 4242)).toBe("served");
      expect(await metricValue(h.registry, "istio_agent_xds_rejected_peers")).toBe(0);
      expect(h.lines.filter((l) => l.includes("the XDS socket accepts clients of any UID")).length).toBe(1);
    },
    20_000,
  );

  testRequiring(
    NEEDS,
    "DISABLE_ENVOY with XDS_AUTHORIZED_UIDS: the list still decides",
    async () => {
      const { h, script } = await harnessWithClient({ DISABLE_ENVOY: "true", XDS_AUTHORIZED_UIDS: "0" });
      expect(await runClient(h.proxy.socketPath, script, 4242)).toBe("refused");
      expect(await metricValue(h.registry, "istio_agent_xds_rejected_peers")).toBe(1);
      expect(h.lines.some((l) => l.includes("accepts clients of any UID"))).toBe(false);
    },
    20_000,
  );

  testRequiring(
    NEEDS,
    "with Envoy (sidecar) the default stays own UID, 1337 and 0: uid 4242 is refused",
    async () => {
      const { h, script } = await harnessWithClient({});
      expect(await runClient(h.proxy.socketPath, script, 4242)).toBe("refused");
      expect(await runClient(h.proxy.socketPath, script, 1337)).toBe("served");
    },
    20_000,
  );
});
