// ASN.1 DER, read: the elements of a certificate request or certificate the local CA needs to look
// inside (src/ca/pkcs10.ts, src/ca/local.ts). Each element is located, not copied: its tag, where
// its header starts, where its content starts and ends, all within the buffer. Only the definite
// length form is accepted (DER has no other), with at most 4 length bytes; anything that runs past
// its parent is a DerReadError naming what was being read.

export class DerReadError extends Error {
  override name = "DerReadError";
}

export interface DerElement {
  tag: number;
  /** Offset of the tag byte. */
  start: number;
  /** Offset of the first content byte. */
  content: number;
  /** Offset just past the last content byte. */
  end: number;
}

/** The element at `at`, which must end at or before `limit`. */
export function readElement(buf: Uint8Array, at: number, limit = buf.length, what = "element"): DerElement {
  if (at + 2 > limit) throw new DerReadError(`${what}: truncated header at byte ${at}`);
  const tag = buf[at]!;
  if ((tag & 0x1f) === 0x1f) throw new DerReadError(`${what}: multi-byte tags are not used here (byte ${at})`);
  let len = buf[at + 1]!;
  let content = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0) throw new DerReadError(`${what}: indefinite length is not DER (byte ${at})`);
    if (n > 4) throw new DerReadError(`${what}: length of ${n} bytes at byte ${at}`);
    if (content + n > limit) throw new DerReadError(`${what}: truncated length at byte ${at}`);
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[content + i]!;
    content += n;
  }
  if (content + len > limit) throw new DerReadError(`${what}: ${len} content bytes at byte ${at} run past the end (${limit})`);
  return { tag, start: at, content, end: content + len };
}

/** The elements inside a constructed element, in order. */
export function children(buf: Uint8Array, parent: DerElement, what = "element"): DerElement[] {
  const out: DerElement[] = [];
  for (let at = parent.content; at < parent.end;) {
    const el = readElement(buf, at, parent.end, what);
    out.push(el);
    at = el.end;
  }
  return out;
}

/** The children of `parent`, which must have tag `tag`, and at least `min` of them. */
export function expectChildren(buf: Uint8Array, parent: DerElement | undefined, tag: number, what: string, min = 0): DerElement[] {
  if (!parent || parent.tag !== tag)
    throw new DerReadError(`${what}: want tag 0x${tag.toString(16)}, found ${parent ? `0x${parent.tag.toString(16)}` : "nothing"}`);
  const kids = children(buf, parent, what);
  if (kids.length < min) throw new DerReadError(`${what}: ${kids.length} elements, want at least ${min}`);
  return kids;
}

/** The whole element, header included (a copy-free view). */
export const rawOf = (buf: Uint8Array, el: DerElement): Uint8Array => buf.subarray(el.start, el.end);

/** The content bytes (a copy-free view). */
export const contentOf = (buf: Uint8Array, el: DerElement): Uint8Array => buf.subarray(el.content, el.end);

/** An OBJECT IDENTIFIER's dotted form. */
export function readOid(buf: Uint8Array, el: DerElement, what = "object identifier"): string {
  if (el.tag !== 0x06 || el.end === el.content) throw new DerReadError(`${what}: not an object identifier`);
  const arcs: number[] = [];
  let v = 0;
  for (let i = el.content; i < el.end; i++) {
    const b = buf[i]!;
    v = v * 128 + (b & 0x7f);
    if (v > 0xffffffff) throw new DerReadError(`${what}: arc too large`);
    if (!(b & 0x80)) {
      arcs.push(v);
      v = 0;
    } else if (i === el.end - 1) throw new DerReadError(`${what}: truncated arc`);
  }
  const first = arcs[0]!;
  const head = first < 80 ? [Math.floor(first / 40), first % 40] : [2, first - 80];
  return [...head, ...arcs.slice(1)].join(".");
}
