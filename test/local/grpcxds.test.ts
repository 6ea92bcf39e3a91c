// End to end: @grpc/grpc-js-xds — an independent xDS client — resolves `xds:///greeter.demo:50051`
// directly against the local xDS server (LDS -> RDS -> CDS -> EDS over ADS) and makes real calls
// to greeter servers whose addresses are in the file; an edit of the file moves the traffic.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as grpcXds from "@grpc/grpc-js-xds";
import YAML from "yaml";
import { memoryLogger } from "../../src/lib/log.ts";
import { createLocalXdsServer, type LocalXdsServer } from "../../src/local/index.ts";
import { greeterClient, startGreeter } from "../../examples/greeter.ts";
import { tempDir, writeText } from "./support.ts";

const EXAMPLE = join(import.meta.dir, "../../examples/xds.yaml");
const tmp = tempDir();
const file = join(tmp.dir, "xds.yaml");
const ac = new AbortController();
const logs = memoryLogger("all:info");
let server: LocalXdsServer;
let a: Awaited<ReturnType<typeof startGreeter>>;
let b: Awaited<ReturnType<typeof startGreeter>>;

function exampleWithPort(port: number): string {
  const doc = YAML.parse(readFileSync(EXAMPLE, "utf8"));
  doc.endpoints[0].endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = port;
  return YAML.stringify(doc);
}

beforeAll(async () => {
  grpcXds.register();
  a = await startGreeter("A");
  b = await startGreeter("B");
  writeText(file, exampleWithPort(a.port));
  server = createLocalXdsServer({ path: file, listen: `unix://${join(tmp.dir, "xds.sock")}`, log: logs.log, pollMs: 200 });
  await server.start(ac.signal);
});

afterAll(async () => {
  ac.abort();
  await server.stopped();
  a.stop();
  b.stop();
  tmp.cleanup();
});

test("grpc-js-xds resolves xds:/// through the local server and calls the endpoint from the file", async () => {
  const bootstrap = {
    xds_servers: [{ server_uri: server.address(), channel_creds: [{ type: "insecure" }], server_features: ["xds_v3"] }],
    node: { id: "sidecar~127.0.0.1~demo.default~default.svc.cluster.local", metadata: { GENERATOR: "grpc" }, locality: {} },
  };
  const client = greeterClient("xds:///greeter.demo:50051", { "grpc.TEST_ONLY_DO_NOT_USE_IN_PROD.xds_bootstrap_config": JSON.stringify(bootstrap) });
  try {
    expect(await client.sayHello("world")).toBe("hello world from A");
    expect(await client.sayHello("again")).toBe("hello again from A");
    expect(a.calls()).toBe(2);

    // Move the endpoint to greeter B: only EDS changes; the client follows without reconnecting.
    writeText(file, exampleWithPort(b.port));
    let answer = "";
    for (let i = 0; i < 100 && !answer.endsWith("from B"); i++) {
      answer = await client.sayHello("moved");
      if (!answer.endsWith("from B")) await Bun.sleep(100);
    }
    expect(answer).toBe("hello moved from B");
    // Only the endpoints changed, so only EDS was reloaded (and pushed).
    expect(logs.lines.filter((l) => l.includes("local xDS: loaded")).at(-1)).toMatch(/: EDS ~outbound\|50051\|\|greeter\.demo$/);
    expect(server.connections()).toBe(1);
  } finally {
    client.close();
  }
}, 20_000);
