// The iptables trace reader `agent proxy` runs with IPTABLES_TRACE_LOGGING=true: reads NFLOG group
// 1337 (the companions `agent iptables --iptables-trace-logging` adds) and logs one line per packet
// under the `iptables` scope: rule name, uid, gid, in/out devices, source and destination.
// Polls a non-blocking netlink socket, so it never blocks the event loop.

import { NflogSocket, type NflogPacket } from "../../native/nflog.ts";
import type { AgentConfig } from "../config/agentconfig.ts";
import type { Component } from "../lib/component.ts";
import { systemClock } from "../lib/clock.ts";
import type { Fields, Logger } from "../lib/log.ts";
import { TRACE_NFLOG_GROUP } from "./builder.ts";
import { formatAddr } from "./net.ts";
import { TRACE_COMMENTS } from "./rules.ts";
import { errorMessage } from "../lib/errors.ts";

export interface NflogSource {
  drain(): NflogPacket[];
  interfaceName(index: number): string | undefined;
  close(): void;
  readonly overruns: number;
}

export interface IptablesTracerOptions {
  log: Logger;
  /** Opens the NFLOG group (real: NflogSocket.open). */
  open: () => Promise<NflogSource>;
  pollIntervalMs?: number;
}

/** Source and destination from the first bytes of an IPv4 or IPv6 header ("" when cut short). */
export function packetAddresses(payload: Uint8Array | undefined): { src: string; dst: string } {
  if (!payload || payload.length < 1) return { src: "", dst: "" };
  const version = payload[0]! >> 4;
  if (version === 4 && payload.length >= 20) {
    return { src: formatAddr({ family: 4, bytes: payload.subarray(12, 16) }), dst: formatAddr({ family: 4, bytes: payload.subarray(16, 20) }) };
  }
  if (version === 6) {
    return {
      src: payload.length >= 24 ? formatAddr({ family: 6, bytes: payload.subarray(8, 24) }) : "",
      dst: payload.length >= 40 ? formatAddr({ family: 6, bytes: payload.subarray(24, 40) }) : "",
    };
  }
  return { src: "", dst: "" };
}

/** The log line for one packet (pure). */
export function describePacket(p: NflogPacket, ifname: (i: number) => string | undefined): { msg: string; fields: Fields } {
  const { src, dst } = packetAddresses(p.payload);
  const dev = (i: number | undefined) => (i === undefined || i === 0 ? "" : (ifname(i) ?? `if${i}`));
  return {
    msg: TRACE_COMMENTS[p.prefix] ?? p.prefix,
    fields: { command: p.prefix, uid: p.uid ?? 0, gid: p.gid ?? 0, inDev: dev(p.inIfindex), outDev: dev(p.outIfindex), src, dst },
  };
}

export class IptablesTracer implements Component {
  readonly name = "iptables-tracer";
  private done: Promise<void> = Promise.resolve();

  constructor(private readonly o: IptablesTracerOptions) {}

  async start(signal: AbortSignal): Promise<void> {
    let src: NflogSource;
    try {
      src = await this.o.open();
    } catch (e) {
      // Debugging aid only: report and let the agent run without it (as Istio does).
      this.o.log.error(`could not open nflog socket: ${errorMessage(e)}`);
      return;
    }
    this.o.log.info(`starting iptables trace logging (NFLOG group ${TRACE_NFLOG_GROUP})`);
    this.done = this.loop(src, signal);
  }

  private async loop(src: NflogSource, signal: AbortSignal): Promise<void> {
    let overruns = 0;
    try {
      while (!signal.aborted) {
        for (const p of src.drain()) {
          const { msg, fields } = describePacket(p, (i) => src.interfaceName(i));
          this.o.log.info(msg, fields);
        }
        if (src.overruns !== overruns) {
          this.o.log.warn(`log failed: NFLOG receive buffer overrun, ${src.overruns - overruns} batch(es) of trace messages lost`);
          overruns = src.overruns;
        }
        await systemClock.sleep(this.o.pollIntervalMs ?? 100, signal);
      }
    } catch (e) {
      this.o.log.error(`iptables trace logging stopped: ${errorMessage(e)}`);
    } finally {
      src.close();
    }
  }

  stopped(): Promise<void> {
    return this.done;
  }
}

/** Factory for the composition root; start() does nothing unless IPTABLES_TRACE_LOGGING is true. */
export function createIptablesTracer(cfg: AgentConfig, log: Logger): Component {
  const tracer = new IptablesTracer({ log: log.child("iptables"), open: () => NflogSocket.open(TRACE_NFLOG_GROUP) });
  return {
    name: tracer.name,
    start: (signal) => (cfg.env.IPTABLES_TRACE_LOGGING ? tracer.start(signal) : Promise.resolve()),
    stopped: () => tracer.stopped(),
  };
}
