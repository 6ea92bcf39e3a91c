// HTTP/2 frame layout (RFC 9113 §4, §6): constants and encoders for the frames the relay sends.
// Parsing lives in the session, which reads frames incrementally off the socket.

export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
export const FRAME_HEADER_BYTES = 9;

export const FrameType = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;

export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 1,
  ENABLE_PUSH: 2,
  MAX_CONCURRENT_STREAMS: 3,
  INITIAL_WINDOW_SIZE: 4,
  MAX_FRAME_SIZE: 5,
  MAX_HEADER_LIST_SIZE: 6,
} as const;

/** HTTP/2 error codes (RFC 9113 §7). */
export const H2Code = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  SETTINGS_TIMEOUT: 4,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  CONNECT_ERROR: 10,
  ENHANCE_YOUR_CALM: 11,
  INADEQUATE_SECURITY: 12,
  HTTP_1_1_REQUIRED: 13,
} as const;

const CODE_NAMES = Object.fromEntries(Object.entries(H2Code).map(([k, v]) => [v, k]));

export function h2CodeName(code: number): string {
  return CODE_NAMES[code] ?? `code ${code}`;
}

export const DEFAULT_WINDOW = 65_535;
export const MAX_WINDOW = 0x7fff_ffff;
export const MIN_FRAME_SIZE = 16_384;
export const MAX_FRAME_SIZE = 16_777_215;

export function writeFrameHeader(b: Uint8Array, at: number, length: number, type: number, flags: number, streamId: number): void {
  b[at] = (length >>> 16) & 0xff;
  b[at + 1] = (length >>> 8) & 0xff;
  b[at + 2] = length & 0xff;
  b[at + 3] = type;
  b[at + 4] = flags;
  b[at + 5] = (streamId >>> 24) & 0x7f;
  b[at + 6] = (streamId >>> 16) & 0xff;
  b[at + 7] = (streamId >>> 8) & 0xff;
  b[at + 8] = streamId & 0xff;
}

export function frame(type: number, flags: number, streamId: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  writeFrameHeader(b, 0, payload.length, type, flags, streamId);
  b.set(payload, FRAME_HEADER_BYTES);
  return b;
}

export function settingsFrame(settings: readonly (readonly [number, number])[]): Buffer {
  const p = Buffer.allocUnsafe(settings.length * 6);
  settings.forEach(([id, v], i) => {
    p.writeUInt16BE(id, i * 6);
    p.writeUInt32BE(v >>> 0, i * 6 + 2);
  });
  return frame(FrameType.SETTINGS, 0, 0, p);
}

export function windowUpdateFrame(streamId: number, increment: number): Buffer {
  const p = Buffer.allocUnsafe(4);
  p.writeUInt32BE(increment & MAX_WINDOW, 0);
  return frame(FrameType.WINDOW_UPDATE, 0, streamId, p);
}

export function rstStreamFrame(streamId: number, code: number): Buffer {
  const p = Buffer.allocUnsafe(4);
  p.writeUInt32BE(code >>> 0, 0);
  return frame(FrameType.RST_STREAM, 0, streamId, p);
}

export function goawayFrame(lastStreamId: number, code: number, debug = ""): Buffer {
  const d = Buffer.from(debug, "utf8");
  const p = Buffer.allocUnsafe(8 + d.length);
  p.writeUInt32BE(lastStreamId & MAX_WINDOW, 0);
  p.writeUInt32BE(code >>> 0, 4);
  p.set(d, 8);
  return frame(FrameType.GOAWAY, 0, 0, p);
}

/** A header block as HEADERS + CONTINUATION frames no larger than `maxFrame`. */
export function headerFrames(streamId: number, block: Uint8Array, endStream: boolean, maxFrame: number): Buffer[] {
  const out: Buffer[] = [];
  let pos = 0;
  let first = true;
  do {
    const piece = block.subarray(pos, pos + maxFrame);
    pos += piece.length;
    const last = pos >= block.length;
    const type = first ? FrameType.HEADERS : FrameType.CONTINUATION;
    const flags = (last ? Flag.END_HEADERS : 0) | (first && endStream ? Flag.END_STREAM : 0);
    out.push(frame(type, flags, streamId, piece));
    first = false;
  } while (pos < block.length);
  return out;
}
