// How the agent serves its status port: by the native responder (nativelisten.ts: a C thread, no
// second JavaScript VM) when the binary carries it for this architecture; by a Worker thread
// (statusthread.ts) when the pod has app probes, which that thread sends on to the application
// itself while the agent is busy (the native side answers readiness only), or when the native
// responder cannot be loaded. The choice and its reason are logged at start.

import { isIP } from "node:net";
import { loadStatusResponder, responderBytes, type StatusResponderLibrary } from "../../native/statusresponder.ts";
import { nativeListen } from "./nativelisten.ts";
import type { StatusListen } from "./server.ts";
import { threadListen } from "./statusthread.ts";

export interface StatusPortListenOptions {
  /** The native library, or why there is none (tests inject; default: the embedded one, loaded on first use). */
  library?: () => Promise<StatusResponderLibrary | string>;
  /** The Worker-thread listener (tests inject). */
  worker?: StatusListen;
}

async function embeddedLibrary(): Promise<StatusResponderLibrary | string> {
  const bytes = await responderBytes();
  return typeof bytes === "string" ? bytes : loadStatusResponder(bytes);
}

export function statusPortListen(onError: (message: string) => void, opts: StatusPortListenOptions = {}): StatusListen {
  let library: Promise<StatusResponderLibrary | string> | undefined;
  const worker = opts.worker ?? threadListen(onError);
  return async (hostname, port, handle, feed) => {
    if (feed.apps) {
      feed.log("info", "status port: served from a Worker thread, which answers the app probes while the agent is busy");
      return worker(hostname, port, handle, feed);
    }
    if (!isIP(hostname)) {
      feed.log("info", `status port: served from a Worker thread: the native responder binds address literals only, not ${hostname}`);
      return worker(hostname, port, handle, feed);
    }
    library ??= (opts.library ?? embeddedLibrary)();
    const lib = await library;
    if (typeof lib === "string") {
      feed.log("info", `status port: served from a Worker thread: ${lib}`);
      return worker(hostname, port, handle, feed);
    }
    return nativeListen(onError, lib)(hostname, port, handle, feed);
  };
}
