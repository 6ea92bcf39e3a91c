// `agent status` and `agent debug` with the HTTP exchange injected: what the screen says for a
// pod that is not ready and whose Envoy NACKed a type, and how bad arguments and refused requests
// fail. The compiled commands against a live agent are in test/status/operator-view.test.ts.

import { describe, expect, test } from "bun:test";
import { runDebug } from "../../src/cli/debug.ts";
import type { CliIO } from "../../src/cli/io.ts";
import type { LocalRequest, LocalResponse } from "../../src/lib/localhttp.ts";
import { humanSeconds, runStatus } from "../../src/cli/status.ts";

function io() {
  const out: string[] = [];
  return { io: { out: (s: string) => out.push(s), err: () => {}, env: {}, cwd: "/" } satisfies CliIO, out };
}

/** A sender answering each path with a fixed status and body; records what was asked. */
function sender(answers: Record<string, [number, unknown]>) {
  const asked: LocalRequest[] = [];
  const send = async (r: LocalRequest): Promise<LocalResponse> => {
    asked.push(r);
    const a = answers[`${r.method} /${r.path}`];
    if (!a) return { status: 404, body: Buffer.from("404 page not found") };
    return { status: a[0], body: Buffer.from(typeof a[1] === "string" ? a[1] : JSON.stringify(a[1])) };
  };
  return { send, asked };
}

const DUMP = {
  schema: "agent.config_dump/v1",
  generated: "2026-06-01T12:00:00.000Z",
  node: { id: "sidecar~10.0.0.5~web-0.shop~shop.svc.cluster.local", podName: "web-0", podNamespace: "shop" },
  ca: { provider: "istiod", address: "istiod.istio-system.svc:15012" },
  identity: {
    spiffeId: "spiffe://cluster.local/ns/shop/sa/web",
    workloadState: "renewing",
    renewFailures: 3,
    lastCaError: { message: "UNAVAILABLE: connection refused", at: "2026-06-01T11:59:30.000Z" },
    certificates: [
      {
        resource: "default",
        source: "ca:istiod",
        state: "renewing",
        serial: "0a1b",
        issuer: "O=cluster.local",
        notAfter: "2026-06-01T13:30:00.000Z",
        expiresInSeconds: 5400,
        spiffeIds: [],
        subject: "",
        notBefore: "",
        chainLength: 2,
      },
    ],
  },
  xds: {
    enabled: true,
    upstream: { address: "istiod.istio-system.svc:15012", state: "connected", since: "2026-06-01T11:58:00.000Z" },
    streamsOpened: 2,
    stream: {
      active: true,
      delta: false,
      opened: "2026-06-01T11:58:00.000Z",
      otherTypes: 0,
      types: [
        {
          typeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener",
          requests: 3,
          requestBytes: 300,
          responses: 2,
          responseBytes: 900,
          lastVersion: "2026-05-31T10:00:00Z/7",
          lastNonce: "abc",
          lastAck: "NACK",
          lastNack: { nonce: "abc", reason: "listener 0.0.0.0_80: duplicate filter chain", code: 3, at: "2026-06-01T11:59:00.000Z" },
        },
      ],
    },
  },
  readiness: {
    ready: false,
    blockers: [{ name: "envoy", since: "", pendingSeconds: 4, lastError: "config not received from XDS server (is Istiod running?): lds updates: 0" }],
    warnings: [{ name: "certificate renewal", since: "", pendingSeconds: 60 }],
    history: [],
    historyDropped: 0,
  },
  envoy: { enabled: true, state: "running", pids: [321], epoch: 0, restarts: 1, restartPolicy: "on-failure", drainPlan: {} },
};

describe("agent status", () => {
  test("a pod that is not ready, renewing, whose Envoy NACKed listeners: every line says so", async () => {
    const { send, asked } = sender({ "GET /debug/config_dump": [200, DUMP] });
    const { io: cli, out } = io();
    expect(await runStatus(["--port", "15999"], cli, send)).toBe(0);
    expect(asked.map((a) => [a.host, a.port, a.method, a.path])).toEqual([["localhost", 15999, "GET", "debug/config_dump"]]);
    expect(out.join("")).toBe(
      [
        "Pod:         shop/web-0 (sidecar~10.0.0.5~web-0.shop~shop.svc.cluster.local)",
        "Identity:    spiffe://cluster.local/ns/shop/sa/web",
        "Certificate: renewing, serial 0a1b, expires 2026-06-01T13:30:00.000Z (in 1h30m)",
        "CA:          istiod istiod.istio-system.svc:15012; last error 30s ago: UNAVAILABLE: connection refused",
        "istiod:      connected istiod.istio-system.svc:15012 since 2m ago",
        "Stream:      SotW, active, 1 type",
        "  TYPE                               VERSION                 NONCE  ANSWER  RESPONSES",
        "  envoy.config.listener.v3.Listener  2026-05-31T10:00:00Z/7  abc    NACK    2",
        "  NACK envoy.config.listener.v3.Listener: listener 0.0.0.0_80: duplicate filter chain",
        "Readiness:   not ready: 1 pending",
        "  blocker  envoy: config not received from XDS server (is Istiod running?): lds updates: 0",
        "  warning  certificate renewal: pending for 60s",
        "Envoy:       running, pid 321, restarts 1",
        "",
      ].join("\n"),
    );
  });

  test("-o json: the summary as data; a bad -o, an argument, a non-dump answer and a refusal fail with what to do", async () => {
    const { send } = sender({ "GET /debug/config_dump": [200, DUMP] });
    const { io: cli, out } = io();
    await runStatus(["-o", "json"], cli, send);
    expect(JSON.parse(out.join(""))).toMatchObject({
      readiness: { ready: false },
      stream: { types: [{ answer: "NACK", lastNack: "listener 0.0.0.0_80: duplicate filter chain" }] },
    });
    await expect(runStatus(["-o", "xml"], io().io, send)).rejects.toThrow("-o xml: unknown output format (want text, json or yaml)");
    await expect(runStatus(["now"], io().io, send)).rejects.toThrow('status takes no arguments, got "now"');
    await expect(runStatus([], io().io, sender({ "GET /debug/config_dump": [200, { hello: 1 }] }).send)).rejects.toThrow(
      'not a config dump (no "schema" field)',
    );
    await expect(runStatus([], io().io, sender({ "GET /debug/config_dump": [403, "Only requests from localhost are allowed"] }).send)).rejects.toThrow(
      "GET http://localhost:15020/debug/config_dump: 403: Only requests from localhost are allowed",
    );
    await expect(runStatus(["--port", "70000"], io().io, send)).rejects.toThrow("--port 70000: not a port number (1-65535)");
  });

  test("humanSeconds: the two largest whole units", () => {
    expect([0, 59, 90, 3600, 5400, 86399, 90061].map(humanSeconds)).toEqual(["0s", "59s", "1m30s", "1h", "1h30m", "23h59m", "1d1h"]);
    // Rounded down: time left is never overstated.
    expect([0.6, 59.7, 86399.6, -90.9].map(humanSeconds)).toEqual(["0s", "59s", "23h59m", "1m30s"]);
  });
});

describe("agent debug", () => {
  test("logging with a spec POSTs it URL-encoded; without, GETs; unknown topic and extra arguments fail", async () => {
    const { send, asked } = sender({
      "GET /logging": [200, { levels: { default: "info" } }],
      "POST /logging?level=xdsproxy%3Adebug%2Csds%3Awarn": [200, { levels: { default: "info" }, changed: [] }],
    });
    const { io: cli, out } = io();
    await runDebug(["logging", "xdsproxy:debug,sds:warn"], cli, send);
    await runDebug(["logging", "-o", "yaml"], cli, send);
    expect(asked.map((a) => `${a.method} /${a.path}`)).toEqual(["POST /logging?level=xdsproxy%3Adebug%2Csds%3Awarn", "GET /logging"]);
    expect(out[1]).toBe("levels:\n  default: info\n");
    await expect(runDebug(["configdump"], io().io, send)).rejects.toThrow("debug configdump: unknown topic (want config_dump or logging)");
    await expect(runDebug([], io().io, send)).rejects.toThrow("debug needs a topic: config_dump or logging");
    await expect(runDebug(["logging", "a:debug", "b:info"], io().io, send)).rejects.toThrow("debug logging takes at most one argument");
  });
});
