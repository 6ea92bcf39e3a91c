// The few xDS messages the agent builds or reads whole (cold path): its own requests (ACK/NACK of
// internal types, NDS/PCDS subscriptions, health reports) and the internal responses it consumes.
// Parsed once from proto/discovery.proto embedded at bundle time. Forwarded traffic never comes
// here: it stays bytes (see frame.ts).

import type Protobuf from "protobufjs";
import discoveryText from "../../proto/discovery.proto" with { type: "text" };
import anyText from "../../proto/xds-any.proto" with { type: "text" };
import statusText from "../../proto/xds-rpc-status.proto" with { type: "text" };
import { FrameError, checkMessage } from "./frame.ts";
import { checkedInput } from "../lib/protobuf-input.ts";
import { errorMessage } from "../lib/errors.ts";

export interface AgentRequest {
  typeUrl: string;
  versionInfo?: string;
  nonce?: string;
  error?: { code: number; message: string };
}

export interface InternalResponse {
  typeUrl: string;
  versionInfo: string;
  nonce: string;
  /** The resources' Any payloads (Delta: each Resource's Any), in order. */
  resources: { typeUrl: string; value: Uint8Array }[];
}

export interface XdsCodec {
  encodeRequest(r: AgentRequest, delta: boolean): Uint8Array;
  decodeResponse(bytes: Uint8Array, delta: boolean): InternalResponse;
}

interface AnyMsg {
  typeUrl?: string;
  value?: Uint8Array;
}

/** The codec, built (schemas parsed) on first use: the agent's own requests start after Envoy does. */
export function lazyXdsCodec(): XdsCodec {
  let codec: XdsCodec | undefined;
  return {
    encodeRequest: (r, delta) => (codec ??= xdsCodec()).encodeRequest(r, delta),
    decodeResponse: (bytes, delta) => (codec ??= xdsCodec()).decodeResponse(bytes, delta),
  };
}

export function xdsCodec(): XdsCodec {
  // Required here, not imported: protobufjs costs ~2 ms to load and the relay needs it only for
  // the agent's own messages, which start after Envoy does.
  const protobuf = require("protobufjs") as typeof Protobuf;
  const root = new protobuf.Root();
  protobuf.parse(anyText as string, root, { keepCase: false });
  protobuf.parse(statusText as string, root, { keepCase: false });
  protobuf.parse(discoveryText as string, root, { keepCase: false });
  root.resolveAll();
  const t = (n: string) => root.lookupType(`envoy.service.discovery.v3.${n}`);
  const Req = t("DiscoveryRequest");
  const DeltaReq = t("DeltaDiscoveryRequest");
  const Res = t("DiscoveryResponse");
  const DeltaRes = t("DeltaDiscoveryResponse");
  return {
    encodeRequest(r, delta) {
      const errorDetail = r.error ? { code: r.error.code, message: r.error.message } : undefined;
      if (delta) return DeltaReq.encode(DeltaReq.create({ typeUrl: r.typeUrl, responseNonce: r.nonce ?? "", errorDetail })).finish();
      return Req.encode(Req.create({ typeUrl: r.typeUrl, versionInfo: r.versionInfo ?? "", responseNonce: r.nonce ?? "", errorDetail })).finish();
    },
    decodeResponse(bytes, delta) {
      checkMessage(bytes);
      try {
        if (delta) {
          const m = DeltaRes.decode(checkedInput(bytes)) as unknown as {
            typeUrl?: string;
            systemVersionInfo?: string;
            nonce?: string;
            resources?: { resource?: AnyMsg }[];
          };
          return {
            typeUrl: m.typeUrl ?? "",
            versionInfo: m.systemVersionInfo ?? "",
            nonce: m.nonce ?? "",
            resources: (m.resources ?? [])
              .filter((r) => r.resource)
              .map((r) => ({ typeUrl: r.resource!.typeUrl ?? "", value: r.resource!.value ?? new Uint8Array() })),
          };
        }
        const m = Res.decode(checkedInput(bytes)) as unknown as { typeUrl?: string; versionInfo?: string; nonce?: string; resources?: AnyMsg[] };
        return {
          typeUrl: m.typeUrl ?? "",
          versionInfo: m.versionInfo ?? "",
          nonce: m.nonce ?? "",
          resources: (m.resources ?? []).map((a) => ({ typeUrl: a.typeUrl ?? "", value: a.value ?? new Uint8Array() })),
        };
      } catch (e) {
        throw new FrameError(`undecodable ${delta ? "DeltaDiscoveryResponse" : "DiscoveryResponse"}: ${errorMessage(e)}`, 0, { cause: e });
      }
    },
  };
}
