// The HTTP/2 codec's small parts, byte for byte (mutation testing, npm run mutate -- xds-h2): the
// frame encoders against the layout of RFC 9113 §4.1 and §6 (bytes written out by hand from the
// RFC's figures), the protocol's constants (RFC 9113 §3.4, §6, §7, §11), the reset budget with a
// scripted clock, and the HPACK encoder's integer prefixes (RFC 7541 §5.1, static indexes from
// Appendix A). The HPACK decoder and Huffman code are checked against RFC 7541's own vectors in
// h2-hpack.test.ts.

import { describe, expect, test } from "bun:test";
import {
  DEFAULT_WINDOW,
  Flag,
  FRAME_HEADER_BYTES,
  FrameType,
  frame,
  goawayFrame,
  H2Code,
  h2CodeName,
  headerFrames,
  MAX_FRAME_SIZE,
  MAX_WINDOW,
  MIN_FRAME_SIZE,
  PREFACE,
  rstStreamFrame,
  Setting,
  settingsFrame,
  windowUpdateFrame,
  writeFrameHeader,
} from "../../src/xds/h2/frames.ts";
import { encodeHeaders, HpackDecoder, HpackError, headerValue } from "../../src/xds/h2/hpack.ts";
import { huffmanDecode } from "../../src/xds/h2/huffman.ts";
import { DEFAULT_RESET_BUDGET, RateBudget } from "../../src/xds/h2/ratebudget.ts";
import { F, T } from "./h2-support.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("HTTP/2 constants (RFC 9113)", () => {
  test("the client preface (§3.4) and the frame header size (§4.1)", () => {
    expect(hex(PREFACE)).toBe("505249202a20485454502f322e300d0a0d0a534d0d0a0d0a");
    expect(FRAME_HEADER_BYTES).toBe(9);
  });

  test("frame types, flags and settings (§6, §11.2, §11.3)", () => {
    // T and F: RFC 9113's numbers, written out once for the HTTP/2 tests (h2-support.ts).
    expect(FrameType).toEqual(T);
    expect(Flag).toEqual(F);
    expect(Setting).toEqual({
      HEADER_TABLE_SIZE: 1,
      ENABLE_PUSH: 2,
      MAX_CONCURRENT_STREAMS: 3,
      INITIAL_WINDOW_SIZE: 4,
      MAX_FRAME_SIZE: 5,
      MAX_HEADER_LIST_SIZE: 6,
    });
  });

  test("window and frame size limits (§6.5.2, §6.9.1)", () => {
    expect([DEFAULT_WINDOW, MAX_WINDOW, MIN_FRAME_SIZE, MAX_FRAME_SIZE]).toEqual([65535, 2147483647, 16384, 16777215]);
  });

  test("error codes and their names (§7); an unknown code is named by number", () => {
    const names = [
      "NO_ERROR",
      "PROTOCOL_ERROR",
      "INTERNAL_ERROR",
      "FLOW_CONTROL_ERROR",
      "SETTINGS_TIMEOUT",
      "STREAM_CLOSED",
      "FRAME_SIZE_ERROR",
      "REFUSED_STREAM",
      "CANCEL",
      "COMPRESSION_ERROR",
      "CONNECT_ERROR",
      "ENHANCE_YOUR_CALM",
      "INADEQUATE_SECURITY",
      "HTTP_1_1_REQUIRED",
    ];
    expect(Object.keys(H2Code)).toEqual(names);
    names.forEach((n, code) => {
      expect(H2Code[n as keyof typeof H2Code] as number).toBe(code);
      expect(h2CodeName(code)).toBe(n);
    });
    expect(h2CodeName(14)).toBe("code 14");
    expect(h2CodeName(0xdead)).toBe("code 57005");
  });
});

describe("frame encoders (RFC 9113 §4.1, §6)", () => {
  test("the 9-octet header: 24-bit length, type, flags, reserved bit cleared on the stream id", () => {
    const b = new Uint8Array(12).fill(0xaa);
    writeFrameHeader(b, 2, 0x123456, 0x09, 0x25, 0xfedcba98);
    expect(hex(b)).toBe("aaaa" + "123456" + "09" + "25" + "7edcba98" + "aa");
    writeFrameHeader(b, 0, 0, 0, 0, 0);
    expect(hex(b.subarray(0, 9))).toBe("000000000000000000");
  });

  test("frame: header and payload; an empty payload by default", () => {
    expect(hex(frame(FrameType.PING, Flag.ACK, 0, Buffer.from("01234567")))).toBe("000008060100000000" + "3031323334353637");
    expect(hex(frame(FrameType.DATA, Flag.END_STREAM, 1))).toBe("000000000100000001");
  });

  test("SETTINGS: identifier (16 bits) and value (32 bits) per setting, on stream 0", () => {
    expect(
      hex(
        settingsFrame([
          [Setting.HEADER_TABLE_SIZE, 4096],
          [Setting.INITIAL_WINDOW_SIZE, 0xffffffff],
          [Setting.MAX_FRAME_SIZE, 16384],
        ]),
      ),
    ).toBe("000012040000000000" + "000100001000" + "0004ffffffff" + "000500004000");
    expect(hex(settingsFrame([]))).toBe("000000040000000000");
  });

  test("WINDOW_UPDATE: 31-bit increment, the reserved bit cleared", () => {
    expect(hex(windowUpdateFrame(3, 0x80000001))).toBe("000004080000000003" + "00000001");
    expect(hex(windowUpdateFrame(0, MAX_WINDOW))).toBe("000004080000000000" + "7fffffff");
  });

  test("RST_STREAM: the error code", () => {
    expect(hex(rstStreamFrame(5, H2Code.CANCEL))).toBe("000004030000000005" + "00000008");
    expect(hex(rstStreamFrame(7, 0xffffffff))).toBe("000004030000000007" + "ffffffff");
  });

  test("GOAWAY: last stream id (reserved bit cleared), code, debug data, on stream 0", () => {
    expect(hex(goawayFrame(0x80000007, H2Code.ENHANCE_YOUR_CALM, "calm"))).toBe("00000c070000000000" + "00000007" + "0000000b" + "63616c6d");
    expect(hex(goawayFrame(1, 0xffffffff))).toBe("000008070000000000" + "00000001" + "ffffffff");
  });

  test("a header block: HEADERS then CONTINUATION, at most maxFrame each; END_HEADERS on the last, END_STREAM on the first", () => {
    const block = Buffer.from("0123456789");
    expect(headerFrames(3, block, true, 4).map(hex)).toEqual([
      "000004010100000003" + hex(Buffer.from("0123")),
      "000004090000000003" + hex(Buffer.from("4567")),
      "000002090400000003" + hex(Buffer.from("89")),
    ]);
    expect(headerFrames(3, block, false, 5).map(hex)).toEqual([
      "000005010000000003" + hex(Buffer.from("01234")),
      "000005090400000003" + hex(Buffer.from("56789")),
    ]);
    expect(headerFrames(1, block, true, 10).map(hex)).toEqual(["00000a010500000001" + hex(block)]);
    expect(headerFrames(1, new Uint8Array(0), false, 10).map(hex)).toEqual(["000000010400000001"]);
  });
});

describe("reset budget (a token bucket)", () => {
  test("nghttp2's defaults", () => {
    expect(DEFAULT_RESET_BUDGET).toEqual({ burst: 1000, perSecond: 33 });
  });

  test("burst at once, then refused until a whole token refills; never more than the burst", () => {
    let t = 1_000_000;
    const b = new RateBudget({ burst: 2, perSecond: 4 }, () => t);
    expect([b.take(), b.take(), b.take()]).toEqual([true, true, false]);
    t += 125; // half a token
    expect(b.take()).toBe(false);
    t += 125; // the other half: exactly one
    expect([b.take(), b.take()]).toEqual([true, false]);
    t += 60_000; // 240 tokens' worth, capped at the burst
    expect([b.take(), b.take(), b.take()]).toEqual([true, true, false]);
  });

  test("refill counts from the last call, not from construction", () => {
    let t = 0;
    const b = new RateBudget({ burst: 1, perSecond: 1 }, () => t);
    t = 5000;
    expect([b.take(), b.take()]).toEqual([true, false]);
    t = 5999;
    expect(b.take()).toBe(false);
    t = 6001; // the 0.999 counted at 5999 plus 0.002: a whole token
    expect(b.take()).toBe(true);
  });
});

describe("HPACK encoder: integer prefixes (RFC 7541 §5.1)", () => {
  test("a static name index below 15 fits the 4-bit prefix; 15 and above continue", () => {
    expect(hex(encodeHeaders([[":path", "/"]]))).toBe("04012f"); // index 4
    expect(hex(encodeHeaders([["date", ""]]))).toBe("0f1200"); // index 33 = 15 + 18
    expect(hex(encodeHeaders([["cache-control", "x"]]))).toBe("0f090178"); // index 24 = 15 + 9
    expect(hex(encodeHeaders([["age", ""]]))).toBe("0f0600"); // index 21
    expect(hex(encodeHeaders([["accept-charset", ""]]))).toBe("0f0000"); // index 15 = 15 + 0
    expect(hex(encodeHeaders([["server", ""]]))).toBe("0f2700"); // index 54
  });

  test("the first of a repeated static name is used (:method GET is index 2, :path / is 4)", () => {
    expect(hex(encodeHeaders([[":method", "POST"]]))).toBe("0204504f5354");
    expect(hex(encodeHeaders([[":status", "200"]]))).toBe("0803323030");
  });

  test("string lengths: 126 in the 7-bit prefix, 127 and 255 continue", () => {
    const len = (n: number) => hex(encodeHeaders([["x", "v".repeat(n)]])).slice(6, -2 * n);
    expect(len(126)).toBe("7e");
    expect(len(127)).toBe("7f00");
    expect(len(128)).toBe("7f01");
    expect(len(254)).toBe("7f7f");
    expect(len(255)).toBe("7f8001");
    expect(len(16_511)).toBe("7f808001"); // 127 + 16384: two continuation octets
  });

  test("an unknown name is a literal: 0x00, then the name and value as raw strings", () => {
    expect(hex(encodeHeaders([["te", "trailers"]]))).toBe("0002" + "7465" + "08" + hex(Buffer.from("trailers")));
  });

  test("the table size update to 0 leads the block when asked for", () => {
    expect(hex(encodeHeaders([[":path", "/"]], true))).toBe("2004012f");
    expect(hex(encodeHeaders([], true))).toBe("20");
    expect(hex(encodeHeaders([], false))).toBe("");
  });

  test("headerValue gives the first value of a name, or undefined", () => {
    const h: [string, string][] = [
      ["a", "1"],
      ["b", "2"],
      ["a", "3"],
    ];
    expect(headerValue(h, "a")).toBe("1");
    expect(headerValue(h, "b")).toBe("2");
    expect(headerValue(h, "c")).toBeUndefined();
  });
});

describe("HPACK static table (RFC 7541 Appendix A)", () => {
  // Copied from the RFC: index 1 first; names with a value listed as name: value.
  const APPENDIX_A = [
    ":authority",
    ":method: GET",
    ":method: POST",
    ":path: /",
    ":path: /index.html",
    ":scheme: http",
    ":scheme: https",
    ":status: 200",
    ":status: 204",
    ":status: 206",
    ":status: 304",
    ":status: 400",
    ":status: 404",
    ":status: 500",
    "accept-charset",
    "accept-encoding: gzip, deflate",
    "accept-language",
    "accept-ranges",
    "accept",
    "access-control-allow-origin",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-range",
    "content-type",
    "cookie",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "link",
    "location",
    "max-forwards",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "refresh",
    "retry-after",
    "server",
    "set-cookie",
    "strict-transport-security",
    "transfer-encoding",
    "user-agent",
    "vary",
    "via",
    "www-authenticate",
  ];

  test("each of the 61 entries, decoded from its indexed representation (0x80 | index)", () => {
    const d = new HpackDecoder();
    const got = APPENDIX_A.map((_, i) => d.decode(Buffer.from([0x80 | (i + 1)]))[0]!).map(([n, v]) => (v ? `${n}: ${v}` : n));
    expect(got).toEqual(APPENDIX_A);
  });

  test("the encoder names each static name by its first index", () => {
    const seen = new Set<string>();
    APPENDIX_A.forEach((e, i) => {
      const name = e.split(": ")[0]!;
      if (seen.has(name)) return;
      seen.add(name);
      const index = i + 1;
      const prefix = index < 15 ? [index] : [15, index - 15];
      expect(hex(encodeHeaders([[name, ""]]))).toBe(hex(Buffer.from([...prefix, 0])));
    });
    expect(seen.size).toBe(52);
  });
});

describe("HPACK decoding errors name what is wrong; limits are inclusive", () => {
  const b = (...x: number[]) => Buffer.from(x);
  const err = (block: Buffer, d = new HpackDecoder()) => {
    try {
      d.decode(block);
    } catch (e) {
      expect(e).toBeInstanceOf(HpackError);
      return (e as Error).message;
    }
    return "decoded";
  };

  test("truncation, indexes, overflow, table size updates, list size", () => {
    expect(err(b(0xff))).toBe("truncated integer");
    expect(err(b(0xff, 0x80))).toBe("truncated integer");
    expect(err(b(0x00))).toBe("truncated string");
    expect(err(b(0x0f, 0x10))).toBe("truncated string");
    expect(err(b(0x00, 0x05, 0x61))).toBe("string longer than the header block");
    expect(err(b(0x80))).toBe("index 0");
    expect(err(b(0xbe))).toBe("index 62 is beyond the dynamic table (0 entries)");
    expect(err(b(0xff, 0xff, 0xff, 0xff, 0xff, 0x0f))).toBe("integer overflow");
    expect(err(b(0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))).toBe("integer overflow");
    expect(err(b(0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00))).toBe("integer overflow"); // a sixth octet, the value still small
    expect(err(b(0x82, 0x20))).toBe("table size update after a header field");
    expect(err(b(0x3f, 0xe2, 0x1f))).toBe("table size 4097 above the advertised 4096");
    const field = Buffer.concat([b(0x00, 4), Buffer.from("name"), b(40), Buffer.alloc(40, 0x61)]); // 4 + 40 + 32 = 76
    expect(err(Buffer.concat([field, b(0x82)]), new HpackDecoder(4096, 76 + 41))).toBe("header list larger than 117 bytes");
  });

  test("a Huffman error inside a block keeps the Huffman decoder's words", () => {
    expect(err(b(0x00, 0x81, 0x00, 0x00))).toBe("Huffman padding is not a prefix of EOS");
  });

  test("2^31-1 is the largest integer; five continuation octets are allowed when the value fits", () => {
    // 127 + 0 + 127·2^7 + 127·2^14 + 127·2^21 + 7·2^28 = 2^31 - 1
    expect(err(b(0xff, 0x80, 0xff, 0xff, 0xff, 0x07))).toBe("index 2147483647 is beyond the dynamic table (0 entries)");
    // a table size update of 31 + 2^28, the fifth octet at 2^28
    expect(err(b(0x3f, 0x80, 0x80, 0x80, 0x80, 0x01), new HpackDecoder(2 ** 29))).toBe("decoded");
  });

  test("a header list of exactly the maximum passes; an entry of exactly the table size is added", () => {
    const field = Buffer.concat([b(0x00, 4), Buffer.from("name"), b(40), Buffer.alloc(40, 0x61)]); // 76 octets
    expect(err(field, new HpackDecoder(4096, 76))).toBe("decoded");
    const d = new HpackDecoder();
    d.decode(b(0x3f, 0x13)); // table size 31 + 19 = 50
    d.decode(Buffer.concat([b(0x40, 9), Buffer.from("a".repeat(9)), b(9), Buffer.from("v".repeat(9))])); // 9 + 9 + 32 = 50
    expect(d.decode(b(0xbe))).toEqual([["a".repeat(9), "v".repeat(9)]]);
  });
});

describe("Huffman decoding errors (RFC 7541 §5.2)", () => {
  const msg = (...x: number[]) => {
    try {
      return huffmanDecode(Buffer.from(x));
    } catch (e) {
      return (e as Error).message;
    }
  };
  test("each error by name", () => {
    expect(msg(0xff, 0xff, 0xff, 0xff)).toBe("EOS symbol inside a Huffman-coded string");
    expect(msg(0x07, 0xff)).toBe("Huffman padding longer than 7 bits");
    expect(msg(0x00)).toBe("Huffman padding is not a prefix of EOS");
    expect(msg(0x07)).toBe("0");
  });
});
