// Log levels set at run time (POST /logging): --log_output_level's syntax, every scope known,
// all-or-nothing, and what changed reported.

import { describe, expect, test } from "bun:test";
import { LogConfigError, LogSink } from "../../src/lib/log.ts";

function sink(levels = "default:info,grpc:none") {
  const lines: string[] = [];
  const s = new LogSink({ outputLevels: levels, write: (l) => lines.push(l) });
  return { s, lines };
}

describe("LogSink run-time levels", () => {
  test("scopeLevels lists default, the flag's scopes and every scope a logger was made for", () => {
    const { s } = sink("default:info,grpc:none");
    s.logger("xdsproxy");
    s.logger("sds").child("probes");
    expect(s.scopeLevels()).toEqual({ default: "info", grpc: "none", probes: "info", sds: "info", xdsproxy: "info" });
  });

  test("set: a scope's level changes, its lines follow, and the change is reported", () => {
    const { s, lines } = sink();
    const x = s.logger("xdsproxy");
    x.debug("before");
    expect(s.setLevels("xdsproxy:debug")).toEqual([{ scope: "xdsproxy", from: "info", to: "debug" }]);
    x.debug("after");
    expect(lines.map((l) => l.split("\t").at(-1))).toEqual(["after"]);
    expect(s.setLevels("xdsproxy:debug")).toEqual([]);
  });

  test("a bare level is the default scope's, which unset scopes follow; warning means warn", () => {
    const { s } = sink();
    s.logger("sds");
    expect(s.setLevels("debug")).toEqual([
      { scope: "default", from: "info", to: "debug" },
      { scope: "sds", from: "info", to: "debug" },
    ]);
    expect(s.setLevels("sds:warning")).toEqual([{ scope: "sds", from: "debug", to: "warn" }]);
  });

  test("all: sets every scope, including ones set before", () => {
    const { s } = sink("default:info,grpc:none,sds:debug");
    s.logger("sds");
    s.setLevels("all:error");
    expect(s.scopeLevels()).toEqual({ default: "error", grpc: "error", sds: "error" });
    s.setLevels("sds:debug");
    expect(s.scopeLevels()).toEqual({ default: "error", grpc: "error", sds: "debug" });
  });

  test("refused: a bad level, an unknown scope, an empty spec, too many colons; nothing applied", () => {
    const { s } = sink();
    s.logger("sds");
    const before = s.scopeLevels();
    expect(() => s.setLevels("sds:debug,default:loud")).toThrow(
      new LogConfigError('level: invalid log level "loud" for scope "default" (want one of debug, info, warn, error, fatal, none)'),
    );
    expect(() => s.setLevels("sds:debug,sdss:debug")).toThrow('level: unknown scope "sdss" (known scopes: default, grpc, sds)');
    expect(() => s.setLevels(" , ")).toThrow("level: no scope:level pair given");
    expect(() => s.setLevels("a:b:c")).toThrow('invalid scope:level pair "a:b:c"');
    expect(s.scopeLevels()).toEqual(before);
  });
});
