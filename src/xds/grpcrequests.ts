// A gRPC server call's request messages, whole: the stream's DATA deframed into one buffer per
// message, with grpc's receive limit (a larger message ends the call RESOURCE_EXHAUSTED before its
// body is gathered, as grpc-js and grpc-go do). For servers whose requests are small and decoded
// whole (SDS); the relay forwards its messages as views instead (relay.ts).

import { GrpcDeframer, MessageBuffer } from "./grpcframe.ts";
import type { GrpcServerCall } from "./grpccall.ts";
import type { H2Stream } from "./h2/stream.ts";
import { Code } from "./types.ts";

export interface RequestSink {
  /** A whole request message (a buffer of its own). */
  onMessage(bytes: Buffer): void;
  /** The client half-closed its side. */
  onEnd(): void;
  /** The call is over: reset (also after the client's end), connection lost, or refused here (`call` finished). Once. */
  onGone(): void;
  /** A write that returned false may continue. */
  onDrain?(): void;
}

/** Installs the stream's handlers: messages, end, reset and drain go to `sink`. */
export function readRequests(stream: H2Stream, call: GrpcServerCall, maxMessageBytes: number, sink: RequestSink): void {
  let msg: MessageBuffer | undefined;
  /** No more messages are read: the client ended its side, or the call was refused or reset. */
  let over = false;
  let gone = false;
  const goneOnce = () => {
    over = true;
    if (gone) return;
    gone = true;
    sink.onGone();
  };
  const refuse = (code: number, message: string) => {
    call.finish({ code, message });
    goneOnce();
  };
  const deframer = new GrpcDeframer({
    onHeader: (compressed, length) => {
      if (compressed) throw new RefusedMessage(Code.INTERNAL, "compressed flag set with identity or empty encoding");
      if (length > maxMessageBytes) throw new RefusedMessage(Code.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs ${maxMessageBytes})`);
      msg = new MessageBuffer(length, length);
    },
    onBody: (b) => msg!.append(b),
    onEnd: () => {
      const m = msg!;
      msg = undefined;
      if (!over) sink.onMessage(m.view());
    },
  });
  stream.handlers = {
    ...stream.handlers,
    onData: (chunk) => {
      if (over) return;
      try {
        deframer.push(chunk);
      } catch (e) {
        if (!(e instanceof RefusedMessage)) throw e;
        refuse(e.code, e.message);
      }
    },
    onEnd: () => {
      if (over) return;
      over = true;
      if (!deframer.idle) return refuse(Code.INTERNAL, "the client ended the stream inside a message");
      sink.onEnd();
    },
    // After the client's end too: a unary call's client cancels once its request is sent.
    onReset: goneOnce,
    onDrain: () => sink.onDrain?.(),
  };
}

class RefusedMessage extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}
