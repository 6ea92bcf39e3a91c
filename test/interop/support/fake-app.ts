#!/usr/bin/env bun
// The application containers of a rendered pod, for the injection lifecycle differential: one
// process serving every app port named on the command line (`http:8080`, `grpc:9000`), so the
// agents' rewritten probes have something real to reach. HTTP: /fail answers 503, any other path
// 200. gRPC: grpc.health.v1.Health/Check answers SERVING. Exits 0 on SIGTERM, as an app would.

import http2, { type ServerHttp2Stream } from "node:http2";

for (const spec of process.argv.slice(2)) {
  const [kind, portText] = spec.split(":");
  const port = Number(portText);
  if (kind === "http") {
    Bun.serve({ port, hostname: "0.0.0.0", fetch: (req) => new Response("app\n", { status: new URL(req.url).pathname === "/fail" ? 503 : 200 }) });
  } else if (kind === "grpc") {
    const server = http2.createServer();
    server.on("stream", (stream: ServerHttp2Stream) => {
      stream.on("data", () => {});
      stream.on("end", () => {
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        // HealthCheckResponse{status: SERVING}: a 5-byte gRPC frame header, then field 1 = 1.
        stream.end(Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]));
      });
    });
    server.listen(port, "0.0.0.0");
  } else {
    console.error(`fake-app: ${spec}: expected http:<port> or grpc:<port>`);
    process.exit(2);
  }
}
process.on("SIGTERM", () => process.exit(0));
console.log("listening");
