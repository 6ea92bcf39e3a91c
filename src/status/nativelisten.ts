// The status port served by the native responder (native/statusresponder.c): a C thread owns the
// listening socket and answers `GET /healthz/ready` itself while the agent is ready, so the
// kubelet's probe does not queue behind a burst on this event loop, without a second JavaScript
// VM. Every other request, and readiness while it is not known to be 200, is relayed to a server
// on this thread bound to 127.0.0.1 (an ephemeral port), which routes it to the status server's
// handler with the client's address (looked up by the relay's source port).
//
// When the native side may answer: only after this thread's own full check answered 200, and only
// until the next readiness change (conditions raised, cleared or failed; Envoy restarted;
// shutdown), which withdraws it before anything else; a check that started before a change does
// not re-arm it. The files the answer depended on (the gRPC bootstrap's certificates) are checked
// by the native side on every probe, as the check here would.

import type { StatusResponderLibrary } from "../../native/statusresponder.ts";
import { errorMessage } from "../lib/errors.ts";
import type { StatusListen } from "./server.ts";

export function nativeListen(onError: (message: string) => void, lib: StatusResponderLibrary): StatusListen {
  return async (hostname, port, handle, feed) => {
    let responder: ReturnType<StatusResponderLibrary["start"]> | undefined;
    /** Readiness changes seen: a 200 computed across one must not re-arm the native answer. */
    let changes = 0;
    const backend = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      idleTimeout: 120,
      fetch: async (req, s) => {
        const ip = s.requestIP(req);
        const remote = (ip && responder?.remote(ip.port)) || ip?.address;
        if (new URL(req.url).pathname !== "/healthz/ready") return handle(req, remote);
        const seen = changes;
        const res = await handle(req, remote);
        if (res.status === 200 && seen === changes) responder?.ready(feed.readyFiles?.() ?? []);
        return res;
      },
      error: (e) => {
        onError(`status server: ${errorMessage(e)}`);
        return new Response("internal error\n", { status: 500 });
      },
    });
    try {
      responder = lib.start(hostname, port, backend.port ?? 0);
    } catch (e) {
      await backend.stop(true);
      throw e;
    }
    const r = responder;
    return {
      port: r.port(),
      hostname,
      readinessChanged: () => {
        changes++;
        r.unready();
      },
      stop: async () => {
        r.stop();
        await backend.stop(true);
      },
    };
  };
}
