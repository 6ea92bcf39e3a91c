import { describe, expect, test } from "bun:test";
import { formatTimestamp, ids, LogSink, parseScopedLevels } from "../../src/lib/log.ts";

const fixed = () => new Date("2026-11-21T10:11:12.345Z");

function sink(opts: { levels?: string; json?: boolean } = {}) {
  const lines: string[] = [];
  const s = new LogSink({ outputLevels: opts.levels ?? "default:info", json: opts.json, write: (l) => lines.push(l), now: fixed });
  return { s, lines };
}

describe("log format", () => {
  test("timestamp is RFC3339 UTC with microseconds", () => {
    expect(formatTimestamp(fixed())).toBe("2026-11-21T10:11:12.345000Z");
  });

  test("text: default scope omits the scope column, others show it", () => {
    const { s, lines } = sink({ levels: "default:info,xdsproxy:debug" });
    s.logger().info("hello");
    s.logger("xdsproxy").debug("connected", { peer: "istiod" });
    expect(lines).toEqual(["2026-11-21T10:11:12.345000Z\tinfo\thello", "2026-11-21T10:11:12.345000Z\tdebug\txdsproxy\tconnected\tpeer=istiod"]);
  });

  test("JSON lines carry level, time, scope, msg and fields", () => {
    const { s, lines } = sink({ json: true });
    s.logger("sds").warn("rotation failed", { err: new Error("boom") });
    expect(JSON.parse(lines[0]!)).toEqual({ level: "warn", time: "2026-11-21T10:11:12.345000Z", scope: "sds", msg: "rotation failed", err: "boom" });
  });

  test("identifiers passed with ids() are JSON keys and leave Istio's text line as it is", () => {
    const json = sink({ json: true });
    json.s.logger("envoy").info("Envoy (pid 4242) exited normally", ids({ pid: 4242 }));
    json.s.logger("sds").warn("cannot read /etc/certs/key.pem", ids({ path: "/etc/certs/key.pem" }));
    expect(json.lines).toEqual([
      '{"level":"info","time":"2026-11-21T10:11:12.345000Z","scope":"envoy","msg":"Envoy (pid 4242) exited normally","pid":4242}',
      '{"level":"warn","time":"2026-11-21T10:11:12.345000Z","scope":"sds","msg":"cannot read /etc/certs/key.pem","path":"/etc/certs/key.pem"}',
    ]);
    const text = sink();
    text.s.logger("envoy").info("Envoy (pid 4242) exited normally", ids({ pid: 4242 }));
    expect(text.lines).toEqual(["2026-11-21T10:11:12.345000Z\tinfo\tenvoy\tEnvoy (pid 4242) exited normally"]);
  });

  test("ids() copies: the caller's object is not marked", () => {
    const { s, lines } = sink();
    const fields = { pid: 7 };
    ids(fields);
    s.logger().info("plain fields still render in text", fields);
    expect(lines).toEqual(["2026-11-21T10:11:12.345000Z\tinfo\tplain fields still render in text\tpid=7"]);
  });

  test("JSON logs leave out the scope for the default scope (as Istio's pkg/log)", () => {
    const { s, lines } = sink({ json: true });
    s.logger().info("Starting proxy agent");
    expect(lines[0]).toBe('{"level":"info","time":"2026-11-21T10:11:12.345000Z","msg":"Starting proxy agent"}');
  });

  test("per-scope levels filter", () => {
    const { s, lines } = sink({ levels: "default:warn,dns:debug" });
    s.logger().info("dropped");
    s.logger().warn("kept");
    s.logger("dns").debug("kept too");
    s.logger("other").info("dropped: unknown scopes follow default");
    expect(lines.map((l) => l.split("\t").pop())).toEqual(["kept", "kept too"]);
  });

  test("all:<level> and a bare level", () => {
    expect(parseScopedLevels("debug").get("default")).toBe("debug");
    const { s, lines } = sink({ levels: "all:error" });
    s.logger("x").warn("no");
    s.logger("x").error("yes");
    expect(lines.length).toBe(1);
  });

  test("none silences a scope", () => {
    const { s, lines } = sink({ levels: "default:info,grpc:none" });
    s.logger("grpc").fatal("quiet");
    expect(lines).toEqual([]);
  });

  test.each(["default:loud", "a:b:c"])("bad level spec %p is an error naming the flag", (spec) => {
    expect(() => parseScopedLevels(spec)).toThrow(/--log_output_level/);
  });
});
