// The relay's one hook for ECDS (the ECDS branch of Istio's pkg/istio-agent/xds_proxy.go): an
// ECDS response from istiod is read at the wire level, its TypedExtensionConfig resources run
// through the Wasm conversion, and the response is re-encoded with only those resources replaced
// (version, nonce, every other field byte for byte). A conversion error becomes a NACK upstream,
// carrying the last ECDS version Envoy ACKed (SotW; Delta NACKs carry none), and nothing reaches
// Envoy — as Istio does.

import type { Logger } from "../lib/log.ts";
import type { WasmConverter } from "./convert.ts";
import { EXTENSION_CONFIG_TYPE } from "./types.ts";
import { encodeFields, lenField, messageField, parseFields, stringField, type WireField } from "../lib/protowire.ts";
import { errorMessage } from "../lib/errors.ts";

/** google.rpc.Code INTERNAL */
const INTERNAL = 13;

export type EcdsResult =
  | { kind: "forward"; message: Uint8Array }
  | { kind: "nack"; request: { typeUrl: string; versionInfo?: string; nonce: string; error: { code: number; message: string } } };

export interface EcdsHook {
  readonly typeUrl: string;
  /** See a request Envoy sent for the ECDS type (SotW: remembers the version it ACKed). */
  observeRequest(msg: Uint8Array, delta: boolean): void;
  convert(msg: Uint8Array, delta: boolean): Promise<EcdsResult>;
}

const RES = { versionInfo: 1, resources: 2, typeUrl: 4, nonce: 5 } as const;
const DELTA_RESOURCE_ANY = 2;
const REQ_VERSION_INFO = 1;

export class EcdsWasmHook implements EcdsHook {
  readonly typeUrl = EXTENSION_CONFIG_TYPE;
  private lastAckVersion = "";

  /** `converter` is asked for on the first ECDS response: the agent loads the Wasm code only then. */
  constructor(
    private readonly converter: () => Promise<WasmConverter>,
    private readonly log: Logger,
  ) {}

  observeRequest(msg: Uint8Array, delta: boolean): void {
    if (delta) return;
    try {
      const v = stringField(parseFields(msg), REQ_VERSION_INFO) ?? "";
      if (v !== "") this.lastAckVersion = v;
    } catch {
      // The relay forwards requests as they are; an unreadable one carries no version for us.
    }
  }

  async convert(msg: Uint8Array, delta: boolean): Promise<EcdsResult> {
    let fields: WireField[];
    let nonce = "";
    let typeUrl = this.typeUrl;
    try {
      fields = parseFields(msg);
      nonce = stringField(fields, RES.nonce) ?? "";
      typeUrl = stringField(fields, RES.typeUrl) || this.typeUrl;
    } catch (e) {
      return this.nack(typeUrl, nonce, delta, `malformed ECDS response: ${errorMessage(e)}`);
    }
    const slots: { index: number; wrapper?: WireField[] }[] = [];
    const anys: Uint8Array[] = [];
    try {
      fields.forEach((f, index) => {
        if (f.no !== RES.resources) return;
        if (!delta) {
          slots.push({ index });
          anys.push(f.data);
          return;
        }
        const wrapper = parseFields(f.data);
        const any = messageField(wrapper, DELTA_RESOURCE_ANY);
        if (any === undefined) return; // a Resource without a body (e.g. a TTL heartbeat) stays as it is
        slots.push({ index, wrapper });
        anys.push(any);
      });
    } catch (e) {
      return this.nack(typeUrl, nonce, delta, `malformed ECDS response: ${errorMessage(e)}`);
    }
    let out: Awaited<ReturnType<WasmConverter["convertResources"]>>;
    try {
      out = await (await this.converter()).convertResources(anys);
    } catch (e) {
      return this.nack(typeUrl, nonce, delta, `Wasm conversion unavailable: ${errorMessage(e)}`);
    }
    if (!out.ok) return this.nack(typeUrl, nonce, delta, out.error);
    const next = [...fields];
    slots.forEach((s, i) => {
      const converted = out.resources[i]!;
      if (converted === anys[i]) return;
      const data = s.wrapper ? encodeFields(replaceAll(s.wrapper, DELTA_RESOURCE_ANY, converted)) : converted;
      next[s.index] = lenField(RES.resources, data);
    });
    return { kind: "forward", message: encodeFields(next) };
  }

  private nack(typeUrl: string, nonce: string, delta: boolean, message: string): EcdsResult {
    this.log.warn(`sending NACK for ECDS response (nonce ${nonce}): ${message}`);
    return {
      kind: "nack",
      request: { typeUrl, versionInfo: delta ? undefined : this.lastAckVersion, nonce, error: { code: INTERNAL, message } },
    };
  }
}

function replaceAll(fields: WireField[], no: number, data: Uint8Array): WireField[] {
  const out: WireField[] = [];
  let placed = false;
  for (const f of fields) {
    if (f.no !== no) out.push(f);
    else if (!placed) {
      out.push(lenField(no, data));
      placed = true;
    }
  }
  return out;
}
