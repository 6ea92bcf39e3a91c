// Where the local xDS server listens: the four forms of `listen` (unix:///abs, unix:relative,
// 127.0.0.1:0, [::1]:0) each answered by a grpc-js client, the socket file's mode (0600), and
// the errors for a form it does not know and an address it cannot bind, naming the address.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import type protobuf from "protobufjs";
import { memoryLogger } from "../../src/lib/log.ts";
import { createLocalXdsServer } from "../../src/local/index.ts";
import { CDS, fixtureYaml } from "./fixtures.ts";
import { decodeAs, envoyRoot, RawAds, tempDir, writeText } from "./support.ts";

let envoy: protobuf.Root;
const tmp = tempDir();
const file = join(tmp.dir, "xds.yaml");

beforeAll(async () => {
  envoy = await envoyRoot();
  writeText(file, fixtureYaml());
});
afterAll(() => tmp.cleanup());

function cdsRequest(): Uint8Array {
  const T = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
  return T.encode(T.fromObject({ node: { id: "listen" }, type_url: CDS })).finish();
}

const ipv6 = (() => {
  try {
    const s = Bun.listen({ hostname: "::1", port: 0, socket: { data() {} } });
    s.stop(true);
    return true;
  } catch {
    return false;
  }
})();

const forms: [string, RegExp][] = [
  [`unix://${join(tmp.dir, "abs", "xds.sock")}`, new RegExp(`^unix://${join(tmp.dir, "abs", "xds.sock")}$`)],
  ["unix:rel/xds.sock", new RegExp(`^unix://${join(tmp.dir, "rel", "xds.sock")}$`)],
  ["127.0.0.1:0", /^127\.0\.0\.1:[1-9]\d*$/],
  ...(ipv6 ? ([["[::1]:0", /^\[::1\]:[1-9]\d*$/]] as [string, RegExp][]) : []),
];

for (const [listen, address] of forms) {
  test(`listen ${listen}: bound, dialled by grpc-js, answered; a socket file has mode 0600 and is removed at stop`, async () => {
    const s = createLocalXdsServer({ path: file, listen, cwd: tmp.dir, log: memoryLogger().log, pollMs: 0 });
    const ctl = new AbortController();
    await s.start(ctl.signal);
    const sock = s.address().startsWith("unix://") ? s.address().slice("unix://".length) : undefined;
    try {
      expect(s.address()).toMatch(address);
      if (sock) expect(statSync(sock).mode & 0o777).toBe(0o600);
      const ads = new RawAds(s.address(), "StreamAggregatedResources");
      ads.send(cdsRequest());
      const r = decodeAs(envoy, "envoy.service.discovery.v3.DiscoveryResponse", await ads.next());
      expect(r.resources.length).toBe(2);
      ads.close();
    } finally {
      ctl.abort();
      await s.stopped();
    }
    if (sock) expect(() => statSync(sock)).toThrow(/ENOENT/);
  });
}

test("a listen form that is neither unix:<path> nor <host>:<port> is refused, naming it", async () => {
  const s = createLocalXdsServer({ path: file, listen: "localhost", log: memoryLogger().log, pollMs: 0 });
  await expect(s.start(new AbortController().signal)).rejects.toThrow("local xDS: cannot listen on localhost: not unix:<path> or <host>:<port>");
});

test("an address in use is refused, naming it and the cause", async () => {
  const taken = createServer();
  await new Promise<void>((r) => taken.listen(0, "127.0.0.1", r));
  const port = (taken.address() as { port: number }).port;
  try {
    const s = createLocalXdsServer({ path: file, listen: `127.0.0.1:${port}`, log: memoryLogger().log, pollMs: 0 });
    await expect(s.start(new AbortController().signal)).rejects.toThrow(
      new RegExp(`^local xDS: cannot listen on 127\\.0\\.0\\.1:${port}: .*(EADDRINUSE|in use)`, "i"),
    );
  } finally {
    taken.close();
  }
});
