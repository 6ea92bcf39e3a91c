import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type Server } from "node:net";
import { runRequest } from "../../src/cli/request.ts";
import { localRequest, parseResponse } from "../../src/lib/localhttp.ts";
import type { CliIO } from "../../src/cli/io.ts";

// A raw TCP server stands in for Envoy's admin port: it records the request bytes exactly as they
// arrived and answers with a canned response, so nothing in between can normalise the method.
let server: Server;
let port = 0;
const seen: string[] = [];
let reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

beforeAll(async () => {
  server = createServer((s) => {
    let buf = "";
    s.on("data", (d) => {
      buf += d.toString("latin1");
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      seen.push(buf);
      s.end(reply);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  port = (server.address() as { port: number }).port;
});
afterAll(() => server.close());

function io(): { io: CliIO; out: string[] } {
  const out: string[] = [];
  return { io: { out: (s) => out.push(s), err: () => {}, env: {}, cwd: "/" }, out };
}

// runRequest only talks to the allowed debug ports; point its sender at the test server instead.
const toTestServer = (r: Parameters<typeof localRequest>[0]) => localRequest({ ...r, host: "127.0.0.1", port });

describe("request sends the method and body as given and always ends with a newline", () => {
  test("lower-case method and a GET body go out verbatim", async () => {
    seen.length = 0;
    reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    const { io: cli, out } = io();
    expect(await runRequest(["get", "/config_dump", '{"a":1}'], cli, toTestServer)).toBe(0);
    expect(seen[0]!.startsWith("get /config_dump HTTP/1.1\r\n")).toBe(true);
    expect(seen[0]!).toContain("\r\nContent-Length: 7\r\n");
    expect(seen[0]!.endsWith('\r\n\r\n{"a":1}')).toBe(true);
    expect(out.join("")).toBe("ok\n");
  });

  test("a body that already ends in a newline still gets one more (fmt.Println)", async () => {
    seen.length = 0;
    reply = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab\n\r\n0\r\n\r\n";
    const { io: cli, out } = io();
    expect(await runRequest(["POST", "logging?level=debug"], cli, toTestServer)).toBe(0);
    expect(seen[0]!.startsWith("POST /logging?level=debug HTTP/1.1\r\n")).toBe(true);
    expect(seen[0]!).toContain("\r\nContent-Length: 0\r\n");
    expect(out.join("")).toBe("ab\n\n");
  });

  test("an empty body prints a lone newline; 404 is not an error", async () => {
    reply = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    const { io: cli, out } = io();
    expect(await runRequest(["GET", "nothing"], cli, toTestServer)).toBe(0);
    expect(out.join("")).toBe("\n");
  });

  test("status above 399 fails with Istio's message", async () => {
    reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\ndown";
    const { io: cli } = io();
    await expect(runRequest(["GET", "ready"], cli, toTestServer)).rejects.toThrow("received unsuccessful status code 503: down");
  });

  test("debug port outside the allowed list is refused", async () => {
    const { io: cli } = io();
    await expect(runRequest(["GET", "x", "--debug-port", "8080"], cli, toTestServer)).rejects.toThrow(
      "debug port 8080 is not in allowed list [15000 15004 15020 15021]",
    );
  });

  test("fewer than two args is cobra's MinimumNArgs error", async () => {
    const { io: cli } = io();
    await expect(runRequest(["GET"], cli, toTestServer)).rejects.toThrow("requires at least 2 arg(s), only received 1");
  });

  test("response larger than the cap is refused, naming the cap", async () => {
    reply = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + "x".repeat(100);
    await expect(localRequest({ host: "127.0.0.1", port, method: "GET", path: "", body: "", timeoutMs: 5000, maxBytes: 64 })).rejects.toThrow(
      "response larger than 64 bytes",
    );
  });

  test("truncated bodies are errors", () => {
    expect(() => parseResponse(Buffer.from("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"), "GET")).toThrow("response body truncated: 3 of 9 bytes");
    expect(() => parseResponse(Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"), "GET")).toThrow("chunked response truncated");
  });
});
