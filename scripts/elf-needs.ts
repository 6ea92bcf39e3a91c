// What a compiled ELF executable needs from the system it runs on: its program interpreter
// (PT_INTERP), its shared libraries (DT_NEEDED, in order) and the symbol versions it requires of
// them (DT_VERNEED, e.g. GLIBC_2.17). Read from the headers alone, so build.ts can check the
// ~110 MiB binaries without readelf (binutils) on the build machine. 64-bit little-endian only
// (x86-64 and aarch64, the targets we publish).

import { closeSync, fstatSync, openSync, readSync } from "node:fs";

export interface ElfNeeds {
  /** e_machine: "x86-64" or "aarch64". */
  machine: string;
  interpreter: string;
  needed: string[];
  /** Required symbol versions per library, e.g. { "libc.so.6": ["GLIBC_2.17", ...] }, each sorted. */
  versions: Record<string, string[]>;
  /** Highest GLIBC_x.y required by any library, or "" when none (musl). */
  maxGlibc: string;
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;
const DT_STRSZ = 10n;
const DT_VERNEED = 0x6ffffffen;
const DT_VERNEEDNUM = 0x6fffffffn;
const MACHINES: Record<number, string> = { 62: "x86-64", 183: "aarch64" };
/** Caps for the parts read, so a corrupt header cannot make us read gigabytes. */
const MAX_PHDRS = 256;
const MAX_DYN_BYTES = 1 << 20;
const MAX_STRTAB_BYTES = 16 << 20;
const MAX_VERNEED = 1024;

interface Segment {
  type: number;
  offset: number;
  vaddr: number;
  filesz: number;
}

/** Compares "2.17" < "2.34" numerically, part by part. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export function readElfNeeds(path: string): ElfNeeds {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const read = (offset: number, length: number, what: string): Buffer => {
      if (offset < 0 || length < 0 || offset + length > size)
        throw new Error(`${path}: ${what} (${length} bytes at ${offset}) lies outside the file (${size} bytes)`);
      const buf = Buffer.alloc(length);
      const n = readSync(fd, buf, 0, length, offset);
      if (n !== length) throw new Error(`${path}: short read of ${what}`);
      return buf;
    };
    const eh = read(0, 64, "ELF header");
    if (eh.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${path}: not an ELF file`);
    if (eh[4] !== 2 || eh[5] !== 1) throw new Error(`${path}: only 64-bit little-endian ELF is supported (class ${eh[4]}, data ${eh[5]})`);
    const machine = MACHINES[eh.readUInt16LE(18)] ?? `machine ${eh.readUInt16LE(18)}`;
    const phoff = Number(eh.readBigUInt64LE(32));
    const phentsize = eh.readUInt16LE(54);
    const phnum = eh.readUInt16LE(56);
    if (phnum > MAX_PHDRS || phentsize < 56) throw new Error(`${path}: implausible program header table (${phnum} × ${phentsize} bytes)`);
    const ph = read(phoff, phnum * phentsize, "program headers");
    const segments: Segment[] = [];
    for (let i = 0; i < phnum; i++) {
      const o = i * phentsize;
      segments.push({
        type: ph.readUInt32LE(o),
        offset: Number(ph.readBigUInt64LE(o + 8)),
        vaddr: Number(ph.readBigUInt64LE(o + 16)),
        filesz: Number(ph.readBigUInt64LE(o + 32)),
      });
    }
    const fileOffset = (vaddr: number, what: string): number => {
      const s = segments.find((s) => s.type === PT_LOAD && vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz);
      if (!s) throw new Error(`${path}: ${what} address 0x${vaddr.toString(16)} is in no loaded segment`);
      return vaddr - s.vaddr + s.offset;
    };

    const interp = segments.find((s) => s.type === PT_INTERP);
    const interpreter = interp ? read(interp.offset, Math.min(interp.filesz, 4096), "interpreter").toString("latin1").replace(/\0.*$/s, "") : "";

    const dynSeg = segments.find((s) => s.type === PT_DYNAMIC);
    if (!dynSeg) return { machine, interpreter, needed: [], versions: {}, maxGlibc: "" };
    if (dynSeg.filesz > MAX_DYN_BYTES) throw new Error(`${path}: dynamic section of ${dynSeg.filesz} bytes is implausibly large`);
    const dyn = read(dynSeg.offset, dynSeg.filesz, "dynamic section");
    const neededOffsets: number[] = [];
    let strtab = -1;
    let strsz = 0;
    let verneed = -1;
    let verneednum = 0;
    for (let o = 0; o + 16 <= dyn.length; o += 16) {
      const tag = dyn.readBigInt64LE(o);
      const val = Number(dyn.readBigUInt64LE(o + 8));
      if (tag === DT_NULL) break;
      if (tag === DT_NEEDED) neededOffsets.push(val);
      else if (tag === DT_STRTAB) strtab = val;
      else if (tag === DT_STRSZ) strsz = val;
      else if (tag === DT_VERNEED) verneed = val;
      else if (tag === DT_VERNEEDNUM) verneednum = val;
    }
    if (strtab < 0 || strsz <= 0 || strsz > MAX_STRTAB_BYTES) throw new Error(`${path}: dynamic string table missing or implausible (${strsz} bytes)`);
    const strings = read(fileOffset(strtab, "DT_STRTAB"), strsz, "dynamic string table");
    const str = (off: number): string => {
      if (off >= strings.length) throw new Error(`${path}: string offset ${off} beyond the string table`);
      const end = strings.indexOf(0, off);
      return strings.toString("latin1", off, end < 0 ? strings.length : end);
    };
    const needed = neededOffsets.map(str);

    const versions: Record<string, string[]> = {};
    if (verneed >= 0) {
      if (verneednum > MAX_VERNEED) throw new Error(`${path}: ${verneednum} version needs is implausible`);
      let at = fileOffset(verneed, "DT_VERNEED");
      for (let i = 0; i < verneednum; i++) {
        const vn = read(at, 16, "Verneed entry");
        const cnt = vn.readUInt16LE(2);
        const file = str(vn.readUInt32LE(4));
        const names = new Set<string>();
        let aux = at + vn.readUInt32LE(8);
        for (let j = 0; j < cnt && j < MAX_VERNEED; j++) {
          const va = read(aux, 16, "Vernaux entry");
          names.add(str(va.readUInt32LE(8)));
          aux += va.readUInt32LE(12);
        }
        versions[file] = [...names].sort(compareVersionNames);
        const next = vn.readUInt32LE(12);
        if (next === 0) break;
        at += next;
      }
    }
    let maxGlibc = "";
    for (const names of Object.values(versions)) {
      for (const n of names) {
        const m = /^GLIBC_(\d+(?:\.\d+)*)$/.exec(n);
        if (m && (maxGlibc === "" || compareVersions(m[1]!, maxGlibc) > 0)) maxGlibc = m[1]!;
      }
    }
    return { machine, interpreter, needed, versions, maxGlibc };
  } finally {
    closeSync(fd);
  }
}

/** Sorts "GLIBC_2.2.5" < "GLIBC_2.17" < "GLIBC_PRIVATE": by prefix, then by version number. */
function compareVersionNames(a: string, b: string): number {
  const ma = /^(.*?)_(\d+(?:\.\d+)*)$/.exec(a);
  const mb = /^(.*?)_(\d+(?:\.\d+)*)$/.exec(b);
  if (ma && mb && ma[1] === mb[1]) return compareVersions(ma[2]!, mb[2]!);
  return a < b ? -1 : a > b ? 1 : 0;
}
