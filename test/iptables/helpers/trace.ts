// Test helper: the iptables tracer component with the real NFLOG socket; log lines on stdout.
import { NflogSocket } from "../../../native/nflog.ts";
import { LogSink } from "../../../src/lib/log.ts";
import { TRACE_NFLOG_GROUP } from "../../../src/iptables/builder.ts";
import { IptablesTracer } from "../../../src/iptables/tracer.ts";
const sink = new LogSink({ outputLevels: "all:info", write: (l) => console.log(l) });
const tracer = new IptablesTracer({ log: sink.logger("iptables"), open: () => NflogSocket.open(TRACE_NFLOG_GROUP), pollIntervalMs: 20 });
const ac = new AbortController();
process.on("SIGTERM", () => ac.abort());
await tracer.start(ac.signal);
console.log("ready");
await tracer.stopped();
process.exit(0);
