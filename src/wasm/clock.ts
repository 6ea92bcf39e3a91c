// Time as the Wasm cache and conversion see it: passed in, so tests drive expiry and purge.

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}
