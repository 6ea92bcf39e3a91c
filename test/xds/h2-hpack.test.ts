// HPACK (RFC 7541) and its Huffman code, checked against the RFC's own examples (Appendix C), a
// few code words copied from Appendix B, and the decoding-error rules of §4–§5. Independent of the
// implementation: expected values come from the RFC, not from our encoder.

import { describe, expect, test } from "bun:test";
import { HpackDecoder, HpackError, encodeHeaders, type HeaderList } from "../../src/xds/h2/hpack.ts";
import { HuffmanError, huffmanDecode, huffmanEncode } from "../../src/xds/h2/huffman.ts";

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ""), "hex");
const bytes = (...b: number[]) => Buffer.from(b);

/** An indexed representation: 1..126 fit the 7-bit prefix, larger ones need a continuation octet. */
function indexed(i: number): Buffer {
  return i < 127 ? bytes(0x80 | i) : bytes(0xff, i - 127);
}
/** The dynamic table, newest first, probed through indexed representations (which never change it). */
function dynamic(d: HpackDecoder): HeaderList {
  const out: HeaderList = [];
  for (let i = 62; i < 200; i++) {
    try {
      out.push(d.decode(indexed(i))[0]!);
    } catch (e) {
      expect(e).toBeInstanceOf(HpackError);
      return out;
    }
  }
  throw new Error("dynamic table larger than expected");
}

const REQ1: HeaderList = [
  [":method", "GET"],
  [":scheme", "http"],
  [":path", "/"],
  [":authority", "www.example.com"],
];
const REQ2: HeaderList = [...REQ1, ["cache-control", "no-cache"]];
const REQ3: HeaderList = [
  [":method", "GET"],
  [":scheme", "https"],
  [":path", "/index.html"],
  [":authority", "www.example.com"],
  ["custom-key", "custom-value"],
];
const DATE1 = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2 = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOC = "https://www.example.com";
const COOKIE = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
const RESP1: HeaderList = [
  [":status", "302"],
  ["cache-control", "private"],
  ["date", DATE1],
  ["location", LOC],
];
const RESP2: HeaderList = [
  [":status", "307"],
  ["cache-control", "private"],
  ["date", DATE1],
  ["location", LOC],
];
const RESP3: HeaderList = [
  [":status", "200"],
  ["cache-control", "private"],
  ["date", DATE2],
  ["location", LOC],
  ["content-encoding", "gzip"],
  ["set-cookie", COOKIE],
];

describe("HPACK: RFC 7541 Appendix C", () => {
  test("C.2.1 literal with indexing adds to the dynamic table", () => {
    const d = new HpackDecoder();
    expect(d.decode(hex("400a637573746f6d2d6b65790d637573746f6d2d686561646572"))).toEqual([["custom-key", "custom-header"]]);
    expect(dynamic(d)).toEqual([["custom-key", "custom-header"]]);
  });

  test("C.2.2 literal without indexing leaves the table empty", () => {
    const d = new HpackDecoder();
    expect(d.decode(hex("040c2f73616d706c652f70617468"))).toEqual([[":path", "/sample/path"]]);
    expect(dynamic(d)).toEqual([]);
  });

  test("C.2.3 never-indexed literal leaves the table empty", () => {
    const d = new HpackDecoder();
    expect(d.decode(hex("100870617373776f726406736563726574"))).toEqual([["password", "secret"]]);
    expect(dynamic(d)).toEqual([]);
  });

  test("C.2.4 indexed static field", () => {
    const d = new HpackDecoder();
    expect(d.decode(hex("82"))).toEqual([[":method", "GET"]]);
    expect(dynamic(d)).toEqual([]);
  });

  const requestSequence = (blocks: string[]) => {
    const d = new HpackDecoder();
    expect(d.decode(hex(blocks[0]!))).toEqual(REQ1);
    expect(dynamic(d)).toEqual([[":authority", "www.example.com"]]);
    expect(d.decode(hex(blocks[1]!))).toEqual(REQ2);
    expect(dynamic(d)).toEqual([
      ["cache-control", "no-cache"],
      [":authority", "www.example.com"],
    ]);
    expect(d.decode(hex(blocks[2]!))).toEqual(REQ3);
    expect(dynamic(d)).toEqual([
      ["custom-key", "custom-value"],
      ["cache-control", "no-cache"],
      [":authority", "www.example.com"],
    ]);
  };

  test("C.3 requests without Huffman, dynamic table carried across three blocks", () => {
    requestSequence(["828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865", "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"]);
  });

  test("C.4 requests with Huffman", () => {
    requestSequence(["828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf", "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"]);
  });

  const responseSequence = (blocks: string[]) => {
    const d = new HpackDecoder(256);
    expect(d.decode(hex(blocks[0]!))).toEqual(RESP1);
    expect(dynamic(d)).toEqual([
      ["location", LOC],
      ["date", DATE1],
      ["cache-control", "private"],
      [":status", "302"],
    ]);
    // 42 more octets do not fit in 256 with 222 used: ":status: 302" is evicted.
    expect(d.decode(hex(blocks[1]!))).toEqual(RESP2);
    expect(dynamic(d)).toEqual([
      [":status", "307"],
      ["location", LOC],
      ["date", DATE1],
      ["cache-control", "private"],
    ]);
    expect(d.decode(hex(blocks[2]!))).toEqual(RESP3);
    expect(dynamic(d)).toEqual([
      ["set-cookie", COOKIE],
      ["content-encoding", "gzip"],
      ["date", DATE2],
    ]);
  };

  test("C.5 responses without Huffman, table size 256 with eviction", () => {
    responseSequence([
      "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
      "4803333037c1c0bf",
      "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31",
    ]);
  });

  test("C.6 responses with Huffman, table size 256 with eviction", () => {
    responseSequence([
      "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
      "4883640effc1c0bf",
      "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
    ]);
  });
});

describe("HPACK: dynamic table rules", () => {
  // 9 + 9 + 32 = 50 octets per entry.
  const entry = (c: string) => Buffer.concat([bytes(0x40, 9), Buffer.from(c.repeat(9)), bytes(9), Buffer.from("v".repeat(9))]);
  const sizeUpdate = (n: number): Buffer => {
    if (n < 31) return bytes(0x20 | n);
    const out = [0x3f];
    let v = n - 31;
    while (v >= 128) {
      out.push((v % 128) | 0x80);
      v = Math.floor(v / 128);
    }
    out.push(v);
    return Buffer.from(out);
  };

  test("entries fill the table exactly to its size; the next one evicts the oldest", () => {
    const d = new HpackDecoder();
    d.decode(sizeUpdate(100));
    d.decode(entry("a"));
    d.decode(entry("b"));
    expect(dynamic(d).map(([n]) => n[0])).toEqual(["b", "a"]);
    d.decode(entry("c"));
    expect(dynamic(d).map(([n]) => n[0])).toEqual(["c", "b"]);
  });

  test("an entry larger than the table empties it and is not added", () => {
    const d = new HpackDecoder();
    d.decode(sizeUpdate(100));
    d.decode(entry("a"));
    const big = Buffer.concat([bytes(0x40, 1), Buffer.from("x"), bytes(80), Buffer.alloc(80, 0x79)]); // 113 octets
    expect(d.decode(big)).toEqual([["x", "y".repeat(80)]]);
    expect(dynamic(d)).toEqual([]);
  });

  test("a literal naming a dynamic entry keeps the name even when adding it evicts that entry", () => {
    const d = new HpackDecoder();
    d.decode(sizeUpdate(100));
    d.decode(entry("a"));
    // name = index 62 (the "aaaaaaaaa" entry), value of 20 octets: 9 + 20 + 32 = 61; 50 + 61 > 100.
    const blk = Buffer.concat([bytes(0x40 | 62, 20), Buffer.alloc(20, 0x7a)]);
    expect(d.decode(blk)).toEqual([["aaaaaaaaa", "z".repeat(20)]]);
    expect(dynamic(d)).toEqual([["aaaaaaaaa", "z".repeat(20)]]);
  });

  test("size update to 0 clears the table; raising it back (within the advertised max) works", () => {
    const d = new HpackDecoder();
    d.decode(entry("a"));
    expect(dynamic(d).length).toBe(1);
    d.decode(sizeUpdate(0));
    expect(dynamic(d)).toEqual([]);
    // Two updates at the start of one block are allowed (RFC 7541 §4.2).
    expect(d.decode(Buffer.concat([sizeUpdate(0), sizeUpdate(4096), bytes(0x82)]))).toEqual([[":method", "GET"]]);
    d.decode(entry("b"));
    expect(dynamic(d).length).toBe(1);
  });

  test("size update after a header field is an error", () => {
    const d = new HpackDecoder();
    expect(() => d.decode(Buffer.concat([bytes(0x82), sizeUpdate(4096)]))).toThrow(HpackError);
  });

  test("size update above the advertised SETTINGS_HEADER_TABLE_SIZE is an error", () => {
    expect(() => new HpackDecoder(4096).decode(sizeUpdate(4097))).toThrow(HpackError);
    expect(() => new HpackDecoder(256).decode(sizeUpdate(257))).toThrow(HpackError);
    expect(new HpackDecoder(256).decode(sizeUpdate(256))).toEqual([]);
  });

  test("index 0 and indexes past the dynamic table are errors", () => {
    const d = new HpackDecoder();
    expect(() => d.decode(bytes(0x80))).toThrow(HpackError);
    expect(() => d.decode(bytes(0xbe))).toThrow(HpackError); // 62 with an empty table
    expect(() => d.decode(bytes(0x40 | 62, 1, 0x61))).toThrow(HpackError); // literal naming index 62
    expect(d.decode(bytes(0xbd))).toEqual([["www-authenticate", ""]]); // 61 is the last static entry
  });

  test("header list larger than the configured maximum is an error", () => {
    const d = new HpackDecoder(4096, 100);
    const field = Buffer.concat([bytes(0x00, 4), Buffer.from("name"), bytes(40), Buffer.alloc(40, 0x61)]); // 76
    expect(d.decode(field)).toEqual([["name", "a".repeat(40)]]);
    expect(() => d.decode(Buffer.concat([field, field]))).toThrow(HpackError);
  });
});

describe("HPACK: integers and strings", () => {
  test("RFC 7541 C.1.2: 1337 with a 5-bit prefix (as a table size update within a large max)", () => {
    const d = new HpackDecoder(2000);
    expect(d.decode(bytes(0x3f, 0x9a, 0x0a))).toEqual([]);
    expect(() => new HpackDecoder(1336).decode(bytes(0x3f, 0x9a, 0x0a))).toThrow(HpackError);
  });

  test("truncated integers and strings are errors", () => {
    const d = new HpackDecoder();
    expect(() => d.decode(bytes(0xff))).toThrow(HpackError); // index needs continuation
    expect(() => d.decode(bytes(0xff, 0x80))).toThrow(HpackError); // continuation bit set, then nothing
    expect(() => d.decode(bytes(0x00))).toThrow(HpackError); // literal, name length missing
    expect(() => d.decode(bytes(0x00, 0x05, 0x61))).toThrow(HpackError); // name shorter than its length
    expect(() => d.decode(bytes(0x0f, 0x10))).toThrow(HpackError); // value missing
    expect(() => d.decode(bytes(0x00, 0x7f, 0xff, 0x7f))).toThrow(HpackError); // huge length, no bytes
  });

  test("integer overflow (beyond 2^31-1) is an error", () => {
    const d = new HpackDecoder();
    expect(() => d.decode(bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0x0f))).toThrow(HpackError);
    expect(() => d.decode(bytes(0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))).toThrow(HpackError);
  });

  test("an over-long string length (zero continuation octets) is an error, not a silent stop", () => {
    // Name length 127 + 0 spelled with 200 continuation octets, and no name bytes follow.
    const zeros = Array<number>(200).fill(0x80);
    expect(() => new HpackDecoder().decode(bytes(0x00, 0x7f, ...zeros, 0x00))).toThrow(HpackError);
  });

  test("an over-long table size update cannot switch eviction off", () => {
    // Size 31 spelled with 200 continuation octets: an error, or a 31-octet table where nothing fits.
    const zeros = Array<number>(200).fill(0x80);
    const d = new HpackDecoder();
    let rejected = false;
    try {
      d.decode(bytes(0x3f, ...zeros, 0x00));
    } catch (e) {
      expect(e).toBeInstanceOf(HpackError);
      rejected = true;
    }
    if (!rejected) {
      for (let i = 0; i < 200; i++) d.decode(bytes(0x40, 1, 0x61, 1, 0x62)); // "a: b" = 34 octets > 31
      expect(dynamic(d)).toEqual([]);
    }
  });

  test("bad Huffman inside a header block is a decoding error", () => {
    const d = new HpackDecoder();
    expect(() => d.decode(bytes(0x00, 0x81, 0x00, 0x00))).toThrow(HpackError); // padding of zeros
    expect(() => d.decode(bytes(0x00, 0x84, 0xff, 0xff, 0xff, 0xff, 0x00))).toThrow(HpackError); // EOS
  });

  test("Huffman-coded name and value in a literal", () => {
    const name = huffmanEncode("x-envoy-peer-metadata-id");
    const value = huffmanEncode("sidecar~10.1.2.3~app-7d9f8.default~default.svc.cluster.local");
    const blk = Buffer.concat([bytes(0x00, 0x80 | name.length), name, bytes(0x80 | value.length), value]);
    expect(new HpackDecoder().decode(blk)).toEqual([["x-envoy-peer-metadata-id", "sidecar~10.1.2.3~app-7d9f8.default~default.svc.cluster.local"]]);
  });
});

describe("Huffman (RFC 7541 Appendix B)", () => {
  test("code words copied from Appendix B", () => {
    // '0' = 00000 (5), 'a' = 00011 (5), ' ' = 010100 (6), 'z' = 1111011 (7); EOS-prefix padding.
    expect(huffmanEncode("0")).toEqual(bytes(0x07));
    expect(huffmanEncode("a")).toEqual(bytes(0x1f));
    expect(huffmanEncode(" ")).toEqual(bytes(0x53));
    expect(huffmanEncode("z")).toEqual(bytes(0xf7));
    // 0x00 = 1111111111000 (13): ff c7 with 3 bits of padding.
    expect(huffmanEncode("\x00")).toEqual(bytes(0xff, 0xc7));
    // 0xff = 11111111111111111111101110 (26)
    expect(huffmanEncode("\xff")).toEqual(bytes(0xff, 0xff, 0xfb, 0xbf));
    // '\n' = 111111111111111111111111111100 (30)
    expect(huffmanEncode("\n")).toEqual(bytes(0xff, 0xff, 0xff, 0xf3));
    // RFC 7541 C.4.1: "www.example.com"
    expect(huffmanEncode("www.example.com")).toEqual(hex("f1e3c2e5f23a6ba0ab90f4ff"));
    expect(huffmanDecode(hex("f1e3c2e5f23a6ba0ab90f4ff"))).toBe("www.example.com");
  });

  test("every octet value round-trips, alone and in one string", () => {
    let all = "";
    for (let b = 0; b < 256; b++) {
      const s = String.fromCharCode(b);
      all += s;
      expect(huffmanDecode(huffmanEncode(s))).toBe(s);
      expect(huffmanDecode(huffmanEncode(s + s + s))).toBe(s + s + s);
    }
    expect(huffmanDecode(huffmanEncode(all))).toBe(all);
    const rev = [...all].reverse().join("");
    expect(huffmanDecode(huffmanEncode(rev))).toBe(rev);
  });

  test("random strings round-trip", () => {
    let seed = 12345;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
    for (let i = 0; i < 300; i++) {
      const n = rnd() % 300;
      let s = "";
      for (let j = 0; j < n; j++) s += String.fromCharCode(rnd() % 256);
      expect(huffmanDecode(huffmanEncode(s))).toBe(s);
    }
  });

  test("empty input decodes to the empty string", () => {
    expect(huffmanDecode(new Uint8Array(0))).toBe("");
  });

  test("padding must be a prefix of EOS (all ones)", () => {
    expect(() => huffmanDecode(bytes(0x00))).toThrow(HuffmanError); // "0" + 000
    expect(() => huffmanDecode(bytes(0x06))).toThrow(HuffmanError); // "0" + 110
  });

  test("padding longer than 7 bits is an error", () => {
    expect(() => huffmanDecode(bytes(0x07, 0xff))).toThrow(HuffmanError); // "0" + 11 ones
    expect(() => huffmanDecode(bytes(0xff))).toThrow(HuffmanError); // 8 ones, no symbol
  });

  test("EOS inside the string is an error", () => {
    expect(() => huffmanDecode(bytes(0xff, 0xff, 0xff, 0xff))).toThrow(HuffmanError);
    // "a" (00011) then EOS (30 ones) then padding
    expect(() => huffmanDecode(bytes(0x1f, 0xff, 0xff, 0xff, 0xff))).toThrow(HuffmanError);
  });
});

describe("encodeHeaders", () => {
  test("output decodes back to the same list and leaves the decoder's table empty", () => {
    const list: HeaderList = [
      [":method", "POST"],
      [":scheme", "https"],
      [":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"],
      [":authority", "istiod.istio-system.svc:15012"],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
      ["www-authenticate", "x"],
      ["authorization", "Bearer " + "t".repeat(900)],
      ["x-127", "v".repeat(127)],
      ["x-126", "v".repeat(126)],
      ["x-128", "v".repeat(128)],
      ["n".repeat(200), "long name"],
      ["empty", ""],
      ["latin1", "caf\xe9 \xff\x80"],
      ["grpc-message", "a%20b"],
    ];
    const d = new HpackDecoder();
    const block = encodeHeaders(list);
    expect(d.decode(block)).toEqual(list);
    expect(dynamic(d)).toEqual([]);
    // Stateless: the same block decodes the same way again.
    expect(d.decode(block)).toEqual(list);
    expect(encodeHeaders([])).toEqual(Buffer.alloc(0));
  });

  test("values of 16 KiB and more (bigger than a frame) encode and decode", () => {
    const list: HeaderList = [["x-big", "q".repeat(40_000)]];
    expect(new HpackDecoder().decode(encodeHeaders(list))).toEqual(list);
  });
});
