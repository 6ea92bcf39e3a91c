// gRPC status on HTTP/2 (gRPC's PROTOCOL-HTTP2 and http-grpc-status-mapping): the status carried
// by trailers, a non-gRPC HTTP answer and a reset stream mapped to gRPC codes, grpc-message
// percent-decoding, and the codes' names. Shared by the xDS upstream and the CA client.

import { H2Code } from "./h2/frames.ts";
import { headerValue, type HeaderList } from "./h2/hpack.ts";
import { Code, type GrpcStatus } from "./types.ts";

/** google.rpc.Code names by number, as gRPC prints them. */
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

/** The name of gRPC code `code`, or the number itself for a code gRPC does not define. */
export function codeName(code: number): string {
  return CODE_NAMES[code] ?? String(code);
}

/** HTTP status of a non-gRPC answer mapped to a gRPC code (gRPC's http-grpc-status-mapping). */
export function httpStatusToCode(status: number): number {
  switch (status) {
    case 400:
      return Code.INTERNAL;
    case 401:
      return Code.UNAUTHENTICATED;
    case 403:
      return 7; // PERMISSION_DENIED
    case 404:
      return Code.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return Code.UNAVAILABLE;
    default:
      return Code.UNKNOWN;
  }
}

export function decodeGrpcMessage(m: string | string[] | undefined): string {
  const s = Array.isArray(m) ? (m[0] ?? "") : (m ?? "");
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** gRPC status for a stream that died with an HTTP/2 error code (gRPC's mapping). */
export function resetStatus(code: number, reason: string): GrpcStatus {
  switch (code) {
    case H2Code.REFUSED_STREAM:
      return { code: Code.UNAVAILABLE, message: reason };
    case H2Code.CANCEL:
      return { code: Code.CANCELLED, message: reason };
    case H2Code.ENHANCE_YOUR_CALM:
      return { code: Code.RESOURCE_EXHAUSTED, message: reason };
    case H2Code.INADEQUATE_SECURITY:
      return { code: 7, message: reason }; // PERMISSION_DENIED
    default:
      return { code: Code.UNAVAILABLE, message: reason };
  }
}

/** The gRPC status carried by a trailers block (or a trailers-only response). */
export function trailerStatus(h: HeaderList): GrpcStatus {
  const st = headerValue(h, "grpc-status");
  return { code: st === undefined || !/^\d+$/.test(st) ? Code.UNKNOWN : Number(st), message: decodeGrpcMessage(headerValue(h, "grpc-message")) };
}
