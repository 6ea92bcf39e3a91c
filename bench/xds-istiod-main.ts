// A minimal istiod for bench/xds.ts: a grpc-js ADS server (plaintext) that answers a
// DiscoveryRequest whose version_info is "<size>,<count>" with <count> DiscoveryResponses, each
// carrying one Cluster resource of <size> bytes. Prints its port.

import * as grpc from "@grpc/grpc-js";
import { ADS_SERVICE_DEF, discoveryTypes } from "../test/support/fake-istiod.ts";

const T = discoveryTypes();
const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const cache = new Map<number, Buffer>();
function response(size: number): Buffer {
  let b = cache.get(size);
  if (!b) {
    b = Buffer.from(
      T.Res.encode(
        T.Res.create({ versionInfo: "1", typeUrl: CDS, nonce: "n", resources: [{ typeUrl: CDS, value: Buffer.alloc(Math.max(0, size - 120), 7) }] }),
      ).finish(),
    );
    cache.set(size, b);
  }
  return b;
}
const server = new grpc.Server({ "grpc.max_send_message_length": -1, "grpc.max_receive_message_length": -1 });
server.addService(ADS_SERVICE_DEF as unknown as grpc.ServiceDefinition, {
  StreamAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
    call.on("error", () => {});
    call.on("data", (raw: Buffer) => {
      const v = String((T.Req.decode(raw) as unknown as { versionInfo?: string }).versionInfo ?? "");
      const [size, count] = v.split(",").map(Number);
      if (!size) return;
      const msg = response(size);
      for (let i = 0; i < (count ?? 1); i++) call.write(msg);
    });
  },
  DeltaAggregatedResources: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => call.end(),
});
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, port) => {
  if (e) throw e;
  process.stdout.write(`${port}\n`);
});
