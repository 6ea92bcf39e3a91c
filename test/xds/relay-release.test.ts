// Through the production xDS proxy (a fake istiod over TLS, the relay, a grpc-js client standing in
// for Envoy on the XDS socket): istiod's chunks are freed once relayed (chunkrelease.ts) and every
// message still reaches Envoy whole, with Envoy's 256 MiB HTTP/2 windows and with grpc-js's 64 KiB
// ones (DATA then waits in the relay for window updates, so the chunks behind it must wait too).
// Freed = the chunk's ArrayBuffer detached: counted by wrapping ArrayBuffer.prototype.transfer.

import { afterEach, expect, test } from "bun:test";
import * as grpc from "@grpc/grpc-js";
import { join } from "node:path";
import { ADS_SERVICE_DEF, discoveryTypes } from "../support/fake-istiod.ts";
import { startHarness, type Harness } from "./harness.ts";

const T = discoveryTypes();
const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const original = ArrayBuffer.prototype.transfer;
let h: Harness | undefined;

afterEach(async () => {
  ArrayBuffer.prototype.transfer = original;
  await h?.stop();
  h = undefined;
});

for (const [window, label] of [
  [256 << 20, "Envoy's windows"],
  [65_535, "64 KiB windows"],
] as const)
  for (const size of [10 * 1024, 1 << 20])
    test(`${label}, ${size / 1024} KiB responses: 24 MiB relayed intact, at least 90 % of it freed once out`, async () => {
      let freed = 0;
      ArrayBuffer.prototype.transfer = function (this: ArrayBuffer, n?: number) {
        freed += this.byteLength;
        return original.call(this, n);
      };
      h = await startHarness({ tls: true });
      const Ctor = grpc.makeGenericClientConstructor(ADS_SERVICE_DEF as unknown as grpc.ServiceDefinition, "ads");
      const client = new Ctor(`unix://${join(h.root, "etc/istio/proxy/XDS")}`, grpc.credentials.createInsecure(), {
        "grpc.max_receive_message_length": -1,
        "grpc-node.flow_control_window": window,
      });
      const call = (client as unknown as Record<string, { call(c: grpc.Client): grpc.ClientDuplexStream<Buffer, Buffer> }>).StreamAggregatedResources!.call(
        client,
      );
      const got: Buffer[] = [];
      call.on("data", (b: Buffer) => got.push(b));
      call.on("error", () => {});
      call.write(Buffer.from(T.Req.encode(T.Req.create({ typeUrl: CDS })).finish()));
      const s = await h.istiod.nextStream();
      const n = Math.floor((24 << 20) / size);
      for (let i = 0; i < n; i++)
        s.send({ typeUrl: CDS, versionInfo: String(i), nonce: `n${i}`, resources: [{ typeUrl: CDS, value: Buffer.alloc(size, i & 255) }] });
      const deadline = Date.now() + 30_000;
      while (got.length < n && Date.now() < deadline) await Bun.sleep(5);
      expect(got.length).toBe(n);
      const bad = got.findIndex((b, i) => {
        const r = T.Res.decode(b) as unknown as { nonce: string; resources: { value: Uint8Array }[] };
        const v = r.resources[0]!.value;
        return r.nonce !== `n${i}` || v.length !== size || v[0] !== (i & 255) || v[size - 1] !== (i & 255);
      });
      expect(bad).toBe(-1);
      // The last chunks go once Envoy asks again (an ACK).
      call.write(Buffer.from(T.Req.encode(T.Req.create({ typeUrl: CDS, versionInfo: String(n - 1), responseNonce: `n${n - 1}` })).finish()));
      await s.nextRequest((r) => r.responseNonce === `n${n - 1}`);
      expect(freed).toBeGreaterThan(0.9 * n * size);
      call.end();
      client.close();
    }, 60_000);
