// `npm run mutate -- <area>...`: StrykerJS mutation testing, one core area at a time. Stryker's
// command runner runs `bun test` on the area's own test files once per mutant (no per-test
// coverage with this runner), so an area is measured in minutes, not seconds; results go to
// reports/mutation/<area>.html and the score per area is recorded by hand in docs/testing.md.
// `npm run mutate -- --list` prints the areas. Extra Stryker options can follow `--`.

import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface Area {
  /** Files mutated (Stryker globs; `file:start-end` for line ranges). */
  mutate: string[];
  /** Test files that cover them, run by `bun test` for each mutant (those that do not exist yet are left out). */
  tests: string[];
  /** Stryker mutators left out for this area (e.g. StringLiteral: log text), said in docs/testing.md. */
  excludedMutations?: string[];
  /** bun's per-test timeout (default 60 s): a mutant that makes a fast test hang then fails in seconds, not at Stryker's timeout. */
  testTimeoutMs?: number;
}

export const AREAS: Record<string, Area> = {
  readiness: { mutate: ["src/lib/readiness.ts"], tests: ["test/lib/readiness.test.ts", "test/status/readiness.test.ts"] },
  // The 100k-frame fuzz test (13 s per run once instrumented) is left out: 289 mutants would take
  // about an hour on two cores. The table and chunk-boundary tests must kill them on their own.
  "xds-scanner": {
    mutate: ["src/xds/frame.ts", "src/xds/grpcframe.ts"],
    tests: ["test/xds/frame.test.ts", "test/xds/frame-wire.test.ts", "test/xds/relay-chunks.test.ts"],
  },
  // The in-memory relay tests and the chunk-boundary tests (a second a run). relay.test.ts and
  // relay-edge.test.ts (real gRPC and TLS, 4 and 8 s) and the fuzz test are left out.
  "xds-relay": {
    mutate: ["src/xds/relay.ts", "src/xds/types.ts"],
    tests: ["test/xds/mutants-relay.test.ts", "test/xds/mutants-relay-state.test.ts", "test/xds/relay-chunks.test.ts"],
  },
  // session.ts (700 lines, its tests 5 s a run) would take hours: the codec half is measured.
  "xds-h2": {
    mutate: ["src/xds/h2/frames.ts", "src/xds/h2/hpack.ts", "src/xds/h2/huffman.ts", "src/xds/h2/ratebudget.ts"],
    tests: ["test/xds/h2-hpack.test.ts", "test/xds/mutants-h2.test.ts"],
  },
  // One HTTP/2 stream's state and flow control, through the session tests (3-4 s a run).
  "xds-h2-stream": {
    mutate: ["src/xds/h2/stream.ts"],
    tests: [
      "test/xds/h2-session.test.ts",
      "test/xds/h2-session-raw.test.ts",
      "test/xds/h2-writer.test.ts",
      "test/xds/mutants-h2-stream.test.ts",
      "test/xds/h2-released.test.ts",
    ],
  },
  // The session (connection state, SETTINGS, flow control, GOAWAY, frame dispatch) through the
  // session tests and the hostile-client test (about 4.5 s a run idle); two halves can run side by
  // side with `-- --mutate src/xds/h2/session.ts:1-420` and `:421-748`.
  "xds-h2-session": {
    mutate: ["src/xds/h2/session.ts"],
    tests: [
      "test/xds/h2-session.test.ts",
      "test/xds/h2-session-raw.test.ts",
      "test/xds/hostile-client.test.ts",
      "test/xds/mutants-h2-session.test.ts",
      "test/xds/mutants-h2-session-flow.test.ts",
      "test/xds/mutants-h2-session-frames.test.ts",
      "test/xds/mutants-h2-session-states.test.ts",
      "test/xds/close-unread.test.ts",
      "test/xds/h2-released.test.ts",
    ],
  },
  // The downstream writer (its queue, the reused output buffer, partial writes and drain): the
  // writer's own tests and the backpressure test, about a second a run.
  "xds-h2-writer": {
    mutate: ["src/xds/h2/writer.ts"],
    tests: [
      "test/xds/h2-writer.test.ts",
      "test/xds/h2-writer-native.test.ts",
      "test/xds/downstream-backpressure.test.ts",
      "test/xds/mutants-h2-writer.test.ts",
      "test/xds/h2-released.test.ts",
    ],
  },
  // The drain wait, drain plan, state machine and restart policy: pure or clock-injected, tested in
  // under a second. The supervisor's process handling is its own area (its tests take 5 s a run).
  envoy: {
    mutate: ["src/envoy/drain.ts", "src/envoy/drainplan.ts", "src/envoy/state.ts", "src/envoy/restart.ts"],
    tests: ["test/envoy/drainplan.test.ts", "test/envoy/state.test.ts", "test/envoy/restart.test.ts", "test/envoy/mutants.test.ts"],
  },
  // The in-process tests (fake launcher and admin, manual clock: under a second a run) stand in
  // for supervisor.test.ts and epochs.test.ts, which run a fake Envoy child process (3 s a run). A
  // mutant that leaves a promise pending fails at bun's 5 s test timeout instead of Stryker's 30 s.
  "envoy-supervisor": {
    mutate: ["src/envoy/supervisor.ts"],
    tests: [
      "test/envoy/state.test.ts",
      "test/envoy/mutants-supervisor.test.ts",
      "test/envoy/mutants-supervisor-restart.test.ts",
      "test/envoy/mutants-supervisor-epochs.test.ts",
    ],
    testTimeoutMs: 5000,
  },
  status: {
    mutate: ["src/status/envoyready.ts", "src/status/readycheck.ts", "src/status/healthcheck.ts"],
    tests: ["test/status/healthcheck.test.ts", "test/status/readiness.test.ts", "test/status/mutants.test.ts"],
  },
  // The PEM helpers, the retry policy and the lazy signer. The client is its own area: its tests
  // run gRPC over TLS against fake CAs (about 10 s a run).
  ca: { mutate: ["src/ca/pem.ts", "src/ca/retry.ts", "src/ca/lazy.ts"], tests: ["test/ca/lazy.test.ts", "test/sds/pure.test.ts", "test/ca/mutants.test.ts"] },
  // The CA client and the unary gRPC call it makes over the agent's own HTTP/2 (xds/unary.ts),
  // through fake CAs over TLS and a scripted node:http2 CA (about 10 s a run).
  "ca-client": {
    mutate: ["src/ca/client.ts", "src/xds/unary.ts"],
    tests: [
      "test/ca/client.test.ts",
      "test/ca/mutants-client.test.ts",
      "test/ca/client-wire.test.ts",
      "test/ca/target.test.ts",
      "test/ca/wire.test.ts",
      "test/xds/unary.test.ts",
    ],
  },
  // The CA client's pure parts: metadata headers, CA_ADDR parsing, the two messages' wire format.
  "ca-wire": {
    mutate: ["src/ca/metadata.ts", "src/ca/target.ts", "src/ca/wire.ts"],
    tests: ["test/ca/metadata.test.ts", "test/ca/target.test.ts", "test/ca/wire.test.ts"],
  },
  // The cache and its rotation and SotW decisions (462 mutants with streams.ts: hours on a shared
  // machine). The in-process cache tests (mutants.test.ts, a local CA, no gRPC) stand in for
  // cache.test.ts, which signs through the fake istiod and doubles the time of a run.
  // The cache's issuing, rotation and renewal (cache.ts 211-322) and trust-bundle update (125-134),
  // with the pure rotation and SotW rules. String literals (log and error text) are left out: each
  // surviving mutant costs a whole run of the signing tests (30 s on the shared machine).
  sds: {
    mutate: ["src/sds/cache.ts:125-134", "src/sds/cache.ts:211-322", "src/sds/rotation.ts", "src/sds/sotw.ts"],
    tests: ["test/sds/pure.test.ts", "test/sds/mutants.test.ts", "test/sds/mutants-issue.test.ts"],
    excludedMutations: ["StringLiteral"],
  },
  // The gRPC-over-HTTP/2 server both Unix sockets run on (XDS and SDS): listener, peer check,
  // routing, calls and trailers, whole-request reading under the size limit. Through the SDS socket
  // tests (grpc-js, node:http2 and raw-frame clients), the XDS socket's hostile-client and
  // back-pressure tests, and the server driven directly by a raw client (mutants-grpc-server):
  // about 4 s a run idle, no test over 1.3 s. A mutant that leaves a close or a wait pending (a
  // third of the first run's kills were Stryker timeouts, 40 s each) fails at bun's 10 s instead.
  "xds-grpc-server": {
    mutate: ["src/xds/grpcserver.ts", "src/xds/grpccall.ts", "src/xds/grpcrequests.ts"],
    tests: [
      "test/xds/mutants-grpc-server.test.ts",
      "test/xds/grpcserver-tcp.test.ts",
      "test/sds/server-h2.test.ts",
      "test/sds/server.test.ts",
      "test/xds/hostile-client.test.ts",
      "test/xds/downstream-backpressure.test.ts",
    ],
    testTimeoutMs: 10_000,
  },
  // The SDS streams' protocol state (subscriptions, nonces, versions, NACKs), through the socket
  // tests (about a second each idle).
  "sds-streams": {
    mutate: ["src/sds/streams.ts"],
    tests: ["test/sds/server.test.ts", "test/sds/wire.test.ts", "test/sds/abort.test.ts", "test/sds/mutants-streams.test.ts"],
  },
  // The SDS service on the shared gRPC server (methods, per-stream wiring, FetchSecrets, the lazy
  // codec), through the socket tests: grpc-js, node:http2 and raw-frame clients (seconds a run).
  "sds-server": {
    mutate: ["src/sds/server.ts"],
    tests: ["test/sds/server.test.ts", "test/sds/server-h2.test.ts", "test/sds/server-wire.test.ts", "test/sds/mutants-sds-server.test.ts"],
  },
  // File-backed secrets: bounded reads of key/chain pairs and root bundles, the retry loop, the
  // shared read and its abort, the directory watch and its debounce (manual clock, real files). A
  // mutant that leaves a wait pending fails at bun's 5 s test timeout, not Stryker's 30 s.
  "sds-files": {
    mutate: ["src/sds/files.ts", "src/sds/filesecrets.ts", "src/sds/watcher.ts"],
    tests: ["test/sds/files.test.ts", "test/sds/abort.test.ts", "test/sds/mutants-sds-files.test.ts"],
    testTimeoutMs: 5000,
  },
  // The upstream dial (plaintext or TLS: ALPN, roots, client certificate, server name or IP SAN,
  // compliance policy) and gRPC status parsing, against local TLS servers with openssl's certificates.
  "xds-dial": {
    mutate: ["src/xds/dial.ts", "src/xds/grpcstatus.ts"],
    tests: ["test/xds/upstream-config.test.ts", "test/xds/unary.test.ts", "test/xds/mutants-xds-dial.test.ts"],
  },
  // Istio's goldens (the CLI in dry-run, and the builder cases) and the hand-written renderings.
  iptables: {
    mutate: ["src/iptables/builder.ts", "src/iptables/rules.ts"],
    tests: [
      "test/iptables/unit.test.ts",
      "test/conformance/iptables.test.ts",
      "test/conformance/iptables-builder.test.ts",
      "test/iptables/mutants-builder.test.ts",
      "test/iptables/mutants-rules.test.ts",
      "test/iptables/mutants-rules-survivors.test.ts",
    ],
  },
  // The 10 s fuzz test is left out; table.test.ts and wire.test.ts run in about a second.
  dns: { mutate: ["src/dns/nametable.ts", "src/dns/lookup.ts"], tests: ["test/dns/table.test.ts", "test/dns/wire.test.ts", "test/dns/mutants.test.ts"] },
  // ProxyConfig layering (validate.ts, mostly message text, is 400 more mutants: its own area). The
  // binary tests (empty-env, statsd) cannot run in Stryker's sandbox, which has no dist/agent.
  config: { mutate: ["src/config/layering.ts"], tests: ["test/config/mutants.test.ts", "test/config/load.test.ts", "test/config/validate.test.ts"] },
  // validate.ts called directly (mutants-validate) and through loadAgentConfig (validate.test.ts's
  // messages, each naming its input, as literals). String literals (message text, 40 % of the
  // mutants) are left out: the messages are asserted word for word by both files anyway.
  "config-validate": {
    mutate: ["src/config/validate.ts"],
    tests: ["test/config/validate.test.ts", "test/config/mutants-validate.test.ts"],
    excludedMutations: ["StringLiteral"],
  },
};

/** The Stryker configuration for one area. */
export function strykerConfig(area: string, a: Area): Record<string, unknown> {
  return {
    $schema: "../../node_modules/@stryker-mutator/core/schema/stryker-schema.json",
    packageManager: "npm",
    testRunner: "command",
    // bun from node_modules, as npm test uses; bail on the first failure (one killing test is enough).
    commandRunner: { command: `node_modules/.bin/bun test --bail --timeout ${a.testTimeoutMs ?? 60_000} ${a.tests.filter((t) => existsSync(t)).join(" ")}` },
    mutate: a.mutate,
    ...(a.excludedMutations ? { mutator: { excludedMutations: a.excludedMutations } } : {}),
    // Only what the tests and the binary-free code need; not dist/, reports or the sandboxes of
    // other areas running at the same time.
    ignorePatterns: ["dist", "reports", "bench", "examples", ".ci", "docs", ".stryker-tmp"],
    coverageAnalysis: "off",
    concurrency: Number(process.env.MUTATE_CONCURRENCY ?? 2),
    timeoutMS: 30_000,
    timeoutFactor: 3,
    reporters: ["clear-text", "html", "json", "progress"],
    htmlReporter: { fileName: `reports/mutation/${area}.html` },
    jsonReporter: { fileName: `reports/mutation/${area}.json` },
    tempDirName: `.stryker-tmp/${area}`,
    cleanTempDir: true,
    thresholds: { high: 90, low: 80, break: null },
  };
}

async function main(argv: string[]): Promise<number> {
  const extra = argv.includes("--") ? argv.slice(argv.indexOf("--") + 1) : [];
  const names = (argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : argv).filter((a) => a !== "--list");
  if (argv.includes("--list") || names.length === 0) {
    for (const [name, a] of Object.entries(AREAS)) console.log(`${name.padEnd(12)} ${a.mutate.join(" ")}`);
    if (names.length === 0 && !argv.includes("--list")) console.log("\nusage: npm run mutate -- <area>... [-- <stryker options>]");
    return names.length === 0 && !argv.includes("--list") ? 2 : 0;
  }
  const unknown = names.filter((n) => !(n in AREAS));
  if (unknown.length) {
    console.error(`unknown area(s): ${unknown.join(", ")} (npm run mutate -- --list)`);
    return 2;
  }
  mkdirSync(".stryker-tmp", { recursive: true });
  let worst = 0;
  for (const name of names) {
    const file = join(".stryker-tmp", `${name}.config.json`);
    writeFileSync(file, JSON.stringify(strykerConfig(name, AREAS[name]!), null, 2));
    const p = Bun.spawn(["node", "node_modules/@stryker-mutator/core/bin/stryker.js", "run", file, ...extra], { stdio: ["inherit", "inherit", "inherit"] });
    worst = Math.max(worst, await p.exited);
  }
  return worst;
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
