// Test helpers for local mode: the real Envoy protos (from @grpc/grpc-js-xds's deps, tests
// only) to decode what the server sends, a raw ADS client over grpc-js (an independent
// implementation of the client side), temp files.

import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import protobuf from "protobufjs";
import { ADS_SERVICE } from "../../src/local/server.ts";
import { envoyProtoRoot } from "../support/envoy-protos.ts";

/** The real Envoy API schemas (snake_case names). */
export async function envoyRoot(): Promise<protobuf.Root> {
  return envoyProtoRoot();
}

/** Decode bytes as a real Envoy message into plain JSON-ish form (enums as names, Any unpacked by us). */
export function decodeAs(root: protobuf.Root, typeName: string, bytes: Uint8Array): Record<string, any> {
  const t = root.lookupType(typeName);
  return t.toObject(t.decode(bytes), { enums: String, longs: Number, defaults: false });
}

export function tempDir(prefix = "localxds-"): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export function writeText(path: string, text: string): void {
  writeFileSync(path, text);
}

const identity = (b: Buffer) => b;
const method = (name: string): grpc.MethodDefinition<Buffer, Buffer> => ({
  path: `/${ADS_SERVICE}/${name}`,
  requestStream: true,
  responseStream: true,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
});

/** The ADS service for grpc-js clients, with Buffer pass-through (de)serializers. */
export const ADS_SERVICE_DEFINITION: grpc.ServiceDefinition = {
  StreamAggregatedResources: method("StreamAggregatedResources"),
  DeltaAggregatedResources: method("DeltaAggregatedResources"),
};

/** A raw bidi ADS stream: write encoded requests, await decoded responses in order. */
export class RawAds {
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<Buffer, Buffer>;
  private readonly queue: Buffer[] = [];
  private waiters: ((b: Buffer) => void)[] = [];
  ended = false;
  error?: grpc.ServiceError;

  constructor(address: string, method: "StreamAggregatedResources" | "DeltaAggregatedResources") {
    const Ctor = grpc.makeGenericClientConstructor(ADS_SERVICE_DEFINITION, "ADS");
    this.client = new Ctor(address, grpc.credentials.createInsecure());
    this.call = (this.client as any)[method]();
    this.call.on("data", (b: Buffer) => {
      const w = this.waiters.shift();
      if (w) w(b);
      else this.queue.push(b);
    });
    this.call.on("error", (e: grpc.ServiceError) => (this.error = e));
    this.call.on("end", () => (this.ended = true));
  }

  send(b: Uint8Array): void {
    this.call.write(Buffer.from(b));
  }

  /** The next response, or an error after `ms`. */
  next(ms = 5000): Promise<Buffer> {
    const b = this.queue.shift();
    if (b) return Promise.resolve(b);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        reject(new Error(`no ADS response within ${ms}ms${this.error ? ` (stream error: ${this.error.message})` : ""}`));
      }, ms);
      const done = (x: Buffer) => {
        clearTimeout(t);
        resolve(x);
      };
      this.waiters.push(done);
    });
  }

  /** Resolves true if nothing arrives within `ms` (used to prove the server stays quiet). */
  async quiet(ms = 300): Promise<boolean> {
    try {
      await this.next(ms);
      return false;
    } catch {
      return true;
    }
  }

  close(): void {
    this.call.end();
    this.client.close();
  }
}
