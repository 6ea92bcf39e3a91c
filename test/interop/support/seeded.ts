// A seeded pseudo-random source for the differential corpora, so a failing case is reproduced
// from its seed. The seed comes from INTEROP_SEED when set, else a fixed default.

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** One element of a non-empty list. */
  pick<T>(xs: readonly T[]): T;
  /** True with probability p. */
  chance(p: number): boolean;
}

/** mulberry32: small, fast, and the same sequence everywhere for a given seed. */
export function seededRng(seed: number): Rng {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    pick: (xs) => xs[Math.floor(next() * xs.length)]!,
    chance: (p) => next() < p,
  };
}

export function corpusSeed(fallback: number): number {
  const s = process.env.INTEROP_SEED;
  if (s === undefined || s === "") return fallback;
  const n = Number(s);
  if (!Number.isInteger(n)) throw new Error(`INTEROP_SEED=${s}: not an integer`);
  return n;
}

/** Runs `fn` over `items` with at most `limit` running at once; results keep the input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let i = 0;
  const worker = async (): Promise<void> => {
    while (i < items.length) {
      const k = i++;
      out[k] = await fn(items[k]!, k);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
