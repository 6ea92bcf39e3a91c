// Test support for the Wasm suites: a small real Wasm module, a loopback HTTP module server with
// programmable behaviour, and a fake clock.

import { createHash } from "node:crypto";
import type { GetOptions } from "../../src/wasm/types.ts";

/** The cache's request options for resource ns.plugin at version 1 (10 s, no pull policy), with `o` on top. */
export const getOptions = (o: Partial<GetOptions> = {}): GetOptions => ({
  checksum: "",
  resourceName: "ns.plugin",
  resourceVersion: "1",
  requestTimeoutMs: 10_000,
  pullPolicy: "Unspecified",
  ...o,
});

/** A valid Wasm module (magic, version, one custom section) of `size` bytes or a little more. */
export function wasmModule(tag: string, size = 200): Uint8Array {
  const name = new TextEncoder().encode("agent-test");
  const payload = new TextEncoder().encode(tag.padEnd(Math.max(tag.length, size - 8 - 3 - name.length), "."));
  const body = [name.length, ...name, ...payload];
  const len = body.length;
  if (len >= 16384) throw new Error("module too big for this helper");
  const leb = len < 128 ? [len] : [(len & 0x7f) | 0x80, len >> 7];
  return Uint8Array.from([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x00, ...leb, ...body]);
}

export function sha256(b: Uint8Array): string {
  return createHash("sha256").update(b).digest("hex");
}

export type Handler = (req: Request, hits: number) => Response | Promise<Response>;

/** A Bun HTTP server on 127.0.0.1 whose routes are set per test; counts hits per path. */
export class ModuleServer {
  readonly hits = new Map<string, number>();
  private readonly routes = new Map<string, Handler>();
  private server: ReturnType<typeof Bun.serve> | undefined;

  start(hostname = "127.0.0.1"): this {
    this.server = Bun.serve({
      hostname,
      port: 0,
      fetch: (req) => {
        const path = new URL(req.url).pathname;
        const n = (this.hits.get(path) ?? 0) + 1;
        this.hits.set(path, n);
        const h = this.routes.get(path);
        return h ? h(req, n) : new Response("not found", { status: 404 });
      },
    });
    return this;
  }

  route(path: string, h: Handler): this {
    this.routes.set(path, h);
    return this;
  }

  url(path: string): string {
    return `http://${this.server!.hostname}:${this.server!.port}${path}`;
  }

  get port(): number {
    return this.server!.port!;
  }

  stop(): void {
    this.server?.stop(true);
  }
}

export class FakeClock {
  constructor(public t = 1_000_000) {}
  now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}
