// A tiny gRPC "greeter" for the local-mode demo and tests: one unary method whose request and
// response are UTF-8 text (identity serialization, no schema needed on either side).

import * as grpc from "@grpc/grpc-js";

const text = {
  serialize: (s: string) => Buffer.from(s, "utf8"),
  deserialize: (b: Buffer) => b.toString("utf8"),
};

export const GREETER_SERVICE: grpc.ServiceDefinition = {
  SayHello: {
    path: "/demo.Greeter/SayHello",
    requestStream: false,
    responseStream: false,
    requestSerialize: text.serialize,
    requestDeserialize: text.deserialize,
    responseSerialize: text.serialize,
    responseDeserialize: text.deserialize,
  },
};

/** Start a greeter on 127.0.0.1:0 answering `hello <name> from <label>`. */
export async function startGreeter(label: string): Promise<{ port: number; calls: () => number; stop(): void }> {
  const server = new grpc.Server();
  let calls = 0;
  server.addService(GREETER_SERVICE, {
    SayHello: (call: grpc.ServerUnaryCall<string, string>, cb: grpc.sendUnaryData<string>) => {
      calls++;
      cb(null, `hello ${call.request} from ${label}`);
    },
  });
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
  return { port, calls: () => calls, stop: () => server.forceShutdown() };
}

export function greeterClient(
  target: string,
  options: grpc.ChannelOptions = {},
): { sayHello(name: string, timeoutMs?: number): Promise<string>; close(): void } {
  const Ctor = grpc.makeGenericClientConstructor(GREETER_SERVICE, "Greeter");
  const client = new Ctor(target, grpc.credentials.createInsecure(), options) as grpc.Client & Record<string, Function>;
  return {
    sayHello: (name, timeoutMs = 10_000) =>
      new Promise((res, rej) =>
        client.SayHello!(name, { deadline: Date.now() + timeoutMs }, (e: grpc.ServiceError | null, r: string) => (e ? rej(e) : res(r))),
      ),
    close: () => client.close(),
  };
}
