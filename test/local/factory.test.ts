// createLocalXds from the agent's configuration: off without LOCAL_XDS_PATH; with it, the file
// resolves against the agent's root and the socket sits in the proxy config directory.

import { expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { loadAgentConfig } from "../../src/config/load.ts";
import { memoryLogger } from "../../src/lib/log.ts";
import { createLocalXds, LOCAL_XDS_SOCKET } from "../../src/local/index.ts";
import { inputs } from "../config/support.ts";
import { tempDir, writeText } from "./support.ts";

test("no LOCAL_XDS_PATH, no server", () => {
  const { config } = loadAgentConfig(inputs({ env: { POD_NAME: "p", POD_NAMESPACE: "ns" } }));
  expect(createLocalXds(config, { log: memoryLogger().log })).toBeUndefined();
});

test("LOCAL_XDS_PATH relative to the root; socket at <root>/<configPath>/local-xds.sock", async () => {
  const tmp = tempDir();
  try {
    mkdirSync(join(tmp.dir, "mesh"));
    writeText(join(tmp.dir, "mesh", "xds.yaml"), readFileSync(join(import.meta.dir, "../../examples/xds.yaml"), "utf8"));
    const base = inputs({ env: { POD_NAME: "p", POD_NAMESPACE: "ns", LOCAL_XDS_PATH: "mesh/xds.yaml" } });
    const { config } = loadAgentConfig({ ...base, root: tmp.dir });
    const logs = memoryLogger("all:info");
    const server = createLocalXds(config, { log: logs.log })!;
    const ac = new AbortController();
    await server.start(ac.signal);
    await server.loaded();
    const socket = join(tmp.dir, "etc/istio/proxy", LOCAL_XDS_SOCKET);
    expect(server.address()).toBe(`unix://${socket}`);
    expect(existsSync(socket)).toBe(true);
    expect(
      logs.lines.some((l) => l.includes("local xDS: serving mesh/xds.yaml") && l.includes("1 listeners, 1 routes, 1 clusters, 1 endpoints, 0 secrets")),
    ).toBe(true);
    ac.abort();
    await server.stopped();
    expect(existsSync(socket)).toBe(false);
  } finally {
    tmp.cleanup();
  }
});
