// gRPC health probe: one unary grpc.health.v1.Health/Check call over plaintext HTTP/2, as kubelet
// sends it. The call is made with node:http2 directly rather than @grpc/grpc-js because grpc-js
// cannot bind the client socket to a source address, and app probes must leave from 127.0.0.6
// (::6) to bypass the inbound capture. The two tiny messages are encoded by hand:
//   HealthCheckRequest  { string service = 1; }
//   HealthCheckResponse { ServingStatus status = 1; }  UNKNOWN=0 SERVING=1 NOT_SERVING=2 SERVICE_UNKNOWN=3

import type http2 from "node:http2";
import net from "node:net";
import { errorMessage } from "../../lib/errors.ts";
import { joinHostPort } from "../loopback.ts";

export const HEALTH_CHECK_PATH = "/grpc.health.v1.Health/Check";
const STATUS_NAMES = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];

export interface GrpcProbeRequest {
  host: string;
  port: number;
  service: string;
  timeoutMs: number;
  localAddress?: string;
  userAgent?: string;
}

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

/** A length-prefixed gRPC message carrying HealthCheckRequest{service}. */
export function encodeHealthCheckRequest(service: string): Uint8Array {
  const s = new TextEncoder().encode(service);
  const msg = s.length ? [0x0a, ...varint(s.length), ...s] : [];
  const out = new Uint8Array(5 + msg.length);
  new DataView(out.buffer).setUint32(1, msg.length);
  out.set(msg, 5);
  return out;
}

/** The status field of a HealthCheckResponse message (without the 5-byte prefix). */
export function decodeHealthStatus(msg: Uint8Array): number {
  let i = 0;
  let status = 0;
  const readVarint = (): number => {
    let v = 0;
    let shift = 0;
    for (;;) {
      if (i >= msg.length) throw new Error("truncated varint");
      const b = msg[i++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
      shift += 7;
    }
  };
  while (i < msg.length) {
    const key = readVarint();
    const wire = key & 7;
    if (key >>> 3 === 1 && wire === 0) status = readVarint();
    else if (wire === 0) readVarint();
    else if (wire === 2) i += readVarint();
    else if (wire === 5) i += 4;
    else if (wire === 1) i += 8;
    else throw new Error(`unsupported wire type ${wire}`);
  }
  return status;
}

/** undefined when the service is SERVING, else why not. node:http2 loads with the first gRPC probe. */
export async function grpcProbe(req: GrpcProbeRequest): Promise<string | undefined> {
  const http2 = await import("node:http2");
  const target = joinHostPort(req.host, req.port);
  return new Promise((resolve) => {
    let done = false;
    let session: http2.ClientHttp2Session | undefined;
    const finish = (err: string | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      session?.destroy();
      resolve(err);
    };
    const timer = setTimeout(() => finish(`grpc request not finished within timeout (${req.timeoutMs}ms) to ${target}`), req.timeoutMs);
    try {
      session = http2.connect(`http://${target}`, {
        createConnection: () =>
          net.connect({
            host: req.host,
            port: req.port,
            ...(req.localAddress ? { localAddress: req.localAddress, family: net.isIPv6(req.localAddress) ? 6 : 4 } : {}),
          }),
      });
    } catch (e) {
      return finish(`grpc probe failed: ${target}: ${errorMessage(e)}`);
    }
    session.on("error", (e) => finish(`grpc probe failed: failed to connect to ${target}: ${errorMessage(e)}`));
    const headers: http2.OutgoingHttpHeaders = {
      ":method": "POST",
      ":path": HEALTH_CHECK_PATH,
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": `${Math.max(1, Math.ceil(req.timeoutMs))}m`,
      "user-agent": req.userAgent ? `${req.userAgent} istio-agent-probe` : "istio-agent-probe",
    };
    const stream = session.request(headers);
    const chunks: Buffer[] = [];
    let grpcStatus: string | undefined;
    let grpcMessage = "";
    const takeStatus = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) {
        grpcStatus = String(h["grpc-status"]);
        grpcMessage = decodeURIComponent(String(h["grpc-message"] ?? ""));
      }
    };
    stream.on("response", (h) => {
      const status = Number(h[":status"]);
      if (status !== 200) finish(`grpc probe failed: ${target} answered HTTP ${status}`);
      takeStatus(h);
    });
    stream.on("trailers", takeStatus);
    stream.on("data", (d: Buffer) => chunks.push(d));
    stream.on("error", (e) => finish(`grpc probe failed: ${target}: ${errorMessage(e)}`));
    stream.on("end", () => {
      if (grpcStatus === undefined) return finish(`grpc probe failed: ${target}: no grpc-status in the answer`);
      if (grpcStatus === "12") return finish(`server does not implement the grpc health protocol (grpc.health.v1.Health): ${grpcMessage}`);
      if (grpcStatus === "4") return finish(`grpc request not finished within timeout: ${grpcMessage}`);
      if (grpcStatus !== "0") return finish(`grpc probe failed: rpc error: code = ${grpcStatus} desc = ${grpcMessage}`);
      const body = Buffer.concat(chunks);
      if (body.length < 5) return finish(`grpc probe failed: ${target}: empty response`);
      let status: number;
      try {
        status = decodeHealthStatus(body.subarray(5, 5 + body.readUInt32BE(1)));
      } catch (e) {
        return finish(`grpc probe failed: ${target}: bad HealthCheckResponse: ${errorMessage(e)}`);
      }
      finish(status === 1 ? undefined : `service ${JSON.stringify(req.service)} is ${STATUS_NAMES[status] ?? `status ${status}`}`);
    });
    stream.end(Buffer.from(encodeHealthCheckRequest(req.service)));
  });
}
