// SO_PEERCRED on the XDS socket: a client running as a UID outside XDS_AUTHORIZED_UIDS is closed
// before any HTTP/2 byte, logged with pid/uid and counted; an allowed client gets the server's
// SETTINGS. Needs root and setpriv (to run the client as another UID): see test/support/requires.ts.

import { afterAll, expect } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { metricValue, startHarness, type Harness } from "./harness.ts";
import { testRequiring } from "../support/requires.ts";

let h: Harness | undefined;
afterAll(async () => h?.stop());

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
  const cmd = asUid === undefined ? [process.execPath, script, socket] : ["setpriv", `--reuid=${asUid}`, `--regid=${asUid}`, "--clear-groups", process.execPath, script, socket];
  const p = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_INSTALL_CACHE_DIR: "/tmp" } });
  const out = await new Response(p.stdout).text();
  await p.exited;
  return out.trim();
}

testRequiring({ root: true, tools: ["setpriv"], apt: ["util-linux"] }, "a client as uid 4242 is refused, logged and counted; root is served", async () => {
  h = await startHarness({ env: { XDS_AUTHORIZED_UIDS: "0,1337" } });
  for (const d of [h.root, join(h.root, "etc"), join(h.root, "etc/istio"), join(h.root, "etc/istio/proxy")]) chmodSync(d, 0o755);
  const script = join(h.root, "client.cjs");
  writeFileSync(script, CLIENT);
  chmodSync(script, 0o644);
  expect(await runClient(h.proxy.socketPath, script, 4242)).toBe("refused");
  expect(await metricValue(h.registry, "istio_agent_xds_rejected_peers")).toBe(1);
  expect(h.lines.some((l) => /rejected connection .* uid=4242/.test(l) && /pid=\d+/.test(l))).toBe(true);
  expect(await runClient(h.proxy.socketPath, script)).toBe("served");
  expect(await metricValue(h.registry, "istio_agent_xds_rejected_peers")).toBe(1);
}, 20_000);
