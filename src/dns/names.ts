// Domain names in wire form (RFC 1035 labels, no compression).

/** Encode a name as labels (no compression); undefined if a label or the name is too long. */
export function encodeName(name: string): Uint8Array | undefined {
  const trimmed = name.endsWith(".") ? name.slice(0, -1) : name;
  if (trimmed === "") return new Uint8Array([0]);
  const labels = trimmed.split(".").map((l) => ENCODER.encode(l));
  let len = 1;
  for (const l of labels) {
    if (l.length === 0 || l.length > 63) return undefined;
    len += l.length + 1;
  }
  if (len > 255) return undefined;
  const out = new Uint8Array(len);
  let off = 0;
  for (const l of labels) {
    out[off++] = l.length;
    out.set(l, off);
    off += l.length;
  }
  out[off] = 0;
  return out;
}

const ENCODER = new TextEncoder();
