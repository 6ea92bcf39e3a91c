// What one relayed ADS stream has carried, per type URL, for the operator's view
// (/debug/config_dump): messages and bytes each way, and from Envoy's requests the version it last
// accepted, the nonce it answered and whether that answer was an ACK or a NACK (with the NACK's
// reason). Envoy's requests say all of this (version_info, response_nonce, error_detail), so the
// relay never has to decode istiod's responses, which it forwards as bytes. A stream carries a
// bounded number of type URLs (MAX_TYPES): a client inventing new ones is counted, not stored.

import { messageField, parseFields, stringField, varintValue } from "../lib/protowire.ts";

/** Type URLs kept per stream; Envoy uses about ten. More are counted in `otherTypes`. */
export const MAX_TYPES = 64;
/** A NACK's reason is kept up to this many characters. */
export const MAX_REASON_CHARS = 1024;

export interface TypeStats {
  typeUrl: string;
  requests: number;
  requestBytes: number;
  responses: number;
  responseBytes: number;
  /** version_info of Envoy's last request (the version it holds); absent on Delta streams. */
  lastVersion?: string;
  /** response_nonce of Envoy's last request (the response it answered). */
  lastNonce?: string;
  /** What Envoy's last request that answered a response was. */
  lastAck?: "ACK" | "NACK";
  lastNack?: { nonce: string; reason: string; code: number; atMs: number };
  lastRequestMs?: number;
  lastResponseMs?: number;
}

export interface StreamSnapshot {
  delta: boolean;
  openedMs: number;
  types: TypeStats[];
  /** Messages whose type URL was past MAX_TYPES. */
  otherTypes: number;
}

export class StreamStats {
  private readonly types = new Map<string, TypeStats>();
  private otherTypes = 0;
  readonly openedMs: number;

  constructor(
    readonly delta: boolean,
    private readonly now: () => number,
  ) {
    this.openedMs = now();
  }

  private entry(typeUrl: string): TypeStats | undefined {
    let t = this.types.get(typeUrl);
    if (!t) {
      if (this.types.size >= MAX_TYPES) {
        this.otherTypes++;
        return undefined;
      }
      t = { typeUrl, requests: 0, requestBytes: 0, responses: 0, responseBytes: 0 };
      this.types.set(typeUrl, t);
    }
    return t;
  }

  /** A whole request from Envoy (already checked by the relay's scanner). */
  request(typeUrl: string, msg: Uint8Array): void {
    const t = this.entry(typeUrl);
    if (!t) return;
    t.requests++;
    t.requestBytes += msg.length;
    t.lastRequestMs = this.now();
    const a = this.answer(msg);
    if (a) this.record(t, a);
  }

  /** The agent's own answer to an internal type's response (NDS, PCDS): ACK, or NACK with `reason`. */
  agentAnswer(typeUrl: string, version: string, nonce: string, nack?: { reason: string; code: number }): void {
    const t = this.entry(typeUrl);
    if (t) this.record(t, { version, nonce, ...(nack ? { nack: { reason: nack.reason.slice(0, MAX_REASON_CHARS), code: nack.code } } : {}) });
  }

  private record(t: TypeStats, a: { version?: string; nonce: string; nack?: { reason: string; code: number } }): void {
    if (a.version !== undefined) t.lastVersion = a.version;
    if (a.nonce === "") return; // a subscription, not an answer to a response
    t.lastNonce = a.nonce;
    if (!a.nack) {
      t.lastAck = "ACK";
      return;
    }
    t.lastAck = "NACK";
    t.lastNack = { nonce: a.nonce, ...a.nack, atMs: this.now() };
  }

  /** SotW: version_info 1, response_nonce 5, error_detail 6; Delta: response_nonce 6, error_detail 7. */
  private answer(msg: Uint8Array): { version?: string; nonce: string; nack?: { reason: string; code: number } } | undefined {
    try {
      const fields = parseFields(msg);
      const nonce = stringField(fields, this.delta ? 6 : 5) ?? "";
      const version = this.delta ? undefined : (stringField(fields, 1) ?? "");
      const error = messageField(fields, this.delta ? 7 : 6);
      if (!error) return { version, nonce };
      const status = parseFields(error);
      return { version, nonce, nack: { reason: (stringField(status, 2) ?? "").slice(0, MAX_REASON_CHARS), code: varintValue(status, 1) ?? 0 } };
    } catch {
      return undefined;
    }
  }

  /** A response from istiod of `bytes` bytes (its type decided by the relay). */
  response(typeUrl: string, bytes: number): void {
    const t = this.entry(typeUrl);
    if (!t) return;
    t.responses++;
    t.responseBytes += bytes;
    t.lastResponseMs = this.now();
  }

  snapshot(): StreamSnapshot {
    return {
      delta: this.delta,
      openedMs: this.openedMs,
      types: [...this.types.values()].map((t) => ({ ...t, ...(t.lastNack ? { lastNack: { ...t.lastNack } } : {}) })),
      otherTypes: this.otherTypes,
    };
  }
}
