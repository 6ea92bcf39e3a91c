// The file's conversion in a short-lived copy of the agent (src/local/converter.ts): what comes
// back is the file's resources as before (same bytes, so the same content-hash versions), a bad
// file is rejected with the same line naming the file, the resource and the field, and each way
// the copy can fail is bounded and named: killed at its deadline, output past its cap, a crash,
// output that is not a conversion, a copy that cannot be started at all (converted in-process).

import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type protobuf from "protobufjs";
import { memoryLogger } from "../../src/lib/log.ts";
import { Readiness } from "../../src/lib/readiness.ts";
import { childConverter, LocalXdsConvertError, type Converter } from "../../src/local/converter.ts";
import { LocalXdsError } from "../../src/local/errors.ts";
import { createLocalXdsServer } from "../../src/local/index.ts";
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE } from "../../src/local/kinds.ts";
import type { Snapshot } from "../../src/local/snapshot.ts";
import { XdsFileSource } from "../../src/local/source.ts";
import { CDS } from "./fixtures.ts";
import { decodeAs, envoyRoot, RawAds, tempDir, writeText } from "./support.ts";

const REPO = resolve(import.meta.dir, "../..");
/** The agent run from source, as src/main.ts's selfCommand is then. */
const SELF = [process.execPath, join(REPO, "src/main.ts")];
const EXAMPLE = readFileSync(join(REPO, "examples/xds.yaml"));
const enc = (s: string) => new TextEncoder().encode(s);
const sh = (script: string) => ["/bin/sh", "-c", script, "sh"];
const tmp = tempDir("localxds-convert-");
let envoy: protobuf.Root;
beforeAll(async () => {
  envoy = await envoyRoot();
});
afterAll(() => tmp.cleanup());

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected the conversion to fail");
}

function decoded(s: Snapshot, typeUrl: string) {
  return [...(s.types.get(typeUrl)?.values() ?? [])].map((r) => ({ name: r.name, version: r.version, body: decodeAs(envoy, typeUrl.split("/")[1]!, r.body) }));
}

test("examples/xds.yaml converted by a copy of the agent: the same resources and content-hash versions as parsing it in the agent did", async () => {
  const log = memoryLogger("all:debug");
  const s = await childConverter({ command: SELF, log: log.log })("examples/xds.yaml", EXAMPLE);
  // The version main's in-process parse gave this file (unchanged resources keep their versions across the upgrade).
  expect(s.version).toBe("3659a13d56c9");
  const [cluster] = decoded(s, CLUSTER_TYPE);
  expect(cluster!.name).toBe("outbound|50051||greeter.demo");
  expect(cluster!.body).toMatchObject({ name: "outbound|50051||greeter.demo", type: "EDS" });
  expect(decoded(s, LISTENER_TYPE).map((l) => l.name)).toEqual(["greeter.demo:50051"]);
  expect(decoded(s, ROUTE_TYPE).map((r) => r.name)).toEqual(["greeter.demo:50051"]);
  expect(decoded(s, ENDPOINT_TYPE)[0]!.body.cluster_name).toBe("outbound|50051||greeter.demo");
  expect(log.lines).toEqual([]);
}, 30_000);

test("a bad file: the copy's rejection is the file's LocalXdsError, naming the file, the resource and the field", async () => {
  const convert = childConverter({ command: SELF, log: memoryLogger().log });
  const bad = await failure(convert("bad.yaml", enc("clusters:\n  - name: x\n    type: EDSS\n")));
  expect(bad).toBeInstanceOf(LocalXdsError);
  expect(bad).not.toBeInstanceOf(LocalXdsConvertError);
  expect(bad.message).toBe(
    'bad.yaml: clusters[0] "x": type: invalid value "EDSS" for enum envoy.config.cluster.v3.Cluster.DiscoveryType (want one of STATIC, STRICT_DNS, LOGICAL_DNS, EDS, ORIGINAL_DST)',
  );
  expect((bad as LocalXdsError).resource).toBe('clusters[0] "x"');
  const typo = await failure(convert("t.yaml", enc("clusters:\n  - name: c\n    lbPolicyy: ROUND_ROBIN\n")));
  expect(typo.message).toBe('t.yaml: clusters[0] "c": unknown field "lbPolicyy" in envoy.config.cluster.v3.Cluster (did you mean "lb_policy"?)');
  const yaml = await failure(convert("y.yaml", enc("clusters:\n  - name: [\n")));
  expect(yaml.message).toStartWith("y.yaml: line 3, column 1: not valid YAML/JSON: ");
  expect((yaml as LocalXdsError).resource).toBeUndefined();
  // An empty file is an empty set, not an error.
  const empty = await convert("e.yaml", enc("# nothing yet\n"));
  expect([...empty.types.values()].every((m) => m.size === 0)).toBe(true);
}, 30_000);

test("a copy that does not finish is killed at the deadline: the converter's failure, not the file's", async () => {
  const e = await failure(childConverter({ command: sh("exec sleep 30"), log: memoryLogger().log, timeoutMs: 300 })("f.yaml", EXAMPLE));
  expect(e).toBeInstanceOf(LocalXdsConvertError);
  expect(e.message).toBe(`f.yaml: the converter (/bin/sh -c exec sleep 30 sh __local-xds-convert) did not finish within 0.3 s and was killed`);
});

test("output past the cap: the copy is killed and the file rejected (its resources are too large), not retried", async () => {
  const e = await failure(childConverter({ command: sh("exec head -c 1000000 /dev/zero"), log: memoryLogger().log, maxOutputBytes: 1000 })("f.yaml", EXAMPLE));
  expect(e).toBeInstanceOf(LocalXdsError);
  expect(e).not.toBeInstanceOf(LocalXdsConvertError);
  expect(e.message).toBe("f.yaml: its resources encode to more than 1000 bytes (the limit of one local xDS file's encoded resources); split or shorten it");
});

test("a copy that fails, or writes something else than a conversion: the converter's failure, with its stderr", async () => {
  const crash = await failure(childConverter({ command: sh("cat >/dev/null; echo boom >&2; exit 3"), log: memoryLogger().log })("f.yaml", EXAMPLE));
  expect(crash).toBeInstanceOf(LocalXdsConvertError);
  expect(crash.message).toBe("f.yaml: the converter (/bin/sh -c cat >/dev/null; echo boom >&2; exit 3 sh __local-xds-convert) exited with code 3: boom");
  const killed = await failure(childConverter({ command: sh("kill -9 $$"), log: memoryLogger().log })("f.yaml", EXAMPLE));
  expect(killed.message).toEndWith("was killed by SIGKILL");
  const cut = await failure(childConverter({ command: sh("cat >/dev/null"), log: memoryLogger().log })("f.yaml", EXAMPLE));
  expect(cut).toBeInstanceOf(LocalXdsConvertError);
  expect(cut.message).toEndWith("wrote output that is not a conversion: the conversion has no end (output cut short)");
  // One resource (a Cluster "c", body empty), then an end that counts two.
  // (printf's octal escapes: \012 field 1 length-delimited, \070 its 56 bytes, \063 the type URL's 51, \022 \001 name "c", \032 \001 end "2".)
  const wrongCount = "\\012\\070\\012\\063" + "type.googleapis.com/envoy.config.cluster.v3.Cluster" + "\\022\\001c" + "\\032\\0012";
  const lying = await failure(childConverter({ command: sh(`cat >/dev/null; printf '${wrongCount}'`), log: memoryLogger().log })("f.yaml", EXAMPLE));
  expect(lying.message).toEndWith("wrote output that is not a conversion: the conversion ends after 2 resources but carries 1");
});

test("a copy that cannot be started here (ENOEXEC: e.g. arm64 under qemu-user): one warning, then the file is converted in this process", async () => {
  // An ELF header for another machine (aarch64): the kernel refuses to exec it.
  const foreign = join(tmp.dir, "agent-arm64");
  writeFileSync(foreign, Buffer.concat([Buffer.from("7f454c460201010000000000000000000200b700", "hex"), Buffer.alloc(200)]), { mode: 0o755 });
  const log = memoryLogger("all:debug");
  const convert: Converter = childConverter({ command: [foreign], log: log.log });
  expect((await convert("examples/xds.yaml", EXAMPLE)).version).toBe("3659a13d56c9");
  expect((await convert("examples/xds.yaml", EXAMPLE)).version).toBe("3659a13d56c9");
  const warned = log.lines.filter((l) => l.includes("cannot be started here"));
  expect(warned.length).toBe(1);
  expect(warned[0]).toContain(`the converter (${foreign} __local-xds-convert) cannot be started here: `);
  expect(warned[0]).toContain("ENOEXEC");
  expect(warned[0]).toContain("converting examples/xds.yaml in the agent's own process from now on");
});

test("a copy whose exec fails after the fork (exit 127, nothing written: how qemu-user reports it): the same fallback; a copy that says why it exits 127 is a failure", async () => {
  const log = memoryLogger("all:debug");
  const convert: Converter = childConverter({ command: sh("cat >/dev/null; exit 127"), log: log.log });
  expect((await convert("examples/xds.yaml", EXAMPLE)).version).toBe("3659a13d56c9");
  expect(log.lines.filter((l) => l.includes("cannot be started here: it exited with code 127 before running (the exec failed)")).length).toBe(1);
  const loud = await failure(childConverter({ command: sh("cat >/dev/null; echo missing >&2; exit 127"), log: log.log })("f.yaml", EXAMPLE));
  expect(loud).toBeInstanceOf(LocalXdsConvertError);
  expect(loud.message).toEndWith("exited with code 127: missing");
});

test("the server with the copy as its converter: a bad file at start blocks readiness with its error; the fixed file is served", async () => {
  const bad = join(tmp.dir, "bad.yaml");
  writeText(bad, "clusters:\n  - name: x\n    type: EDSS\n");
  const readiness = new Readiness();
  const log = memoryLogger("all:info");
  const s = createLocalXdsServer({
    path: bad,
    listen: "127.0.0.1:0",
    log: log.log,
    readiness,
    pollMs: 0,
    convert: childConverter({ command: SELF, log: log.log }),
  });
  const ctl = new AbortController();
  await s.start(ctl.signal);
  const ads = new RawAds(s.address(), "StreamAggregatedResources");
  try {
    const Req = envoy.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
    ads.send(Req.encode(Req.fromObject({ node: { id: "n" }, type_url: CDS })).finish());
    const message = `${bad}: clusters[0] "x": type: invalid value "EDSS" for enum envoy.config.cluster.v3.Cluster.DiscoveryType`;
    for (let i = 0; i < 500 && !readiness.blockers()[0]?.lastError; i++) await Bun.sleep(20);
    expect(readiness.blockers()).toMatchObject([{ name: "local xDS file loaded", lastError: expect.stringContaining(message) }]);
    expect(log.lines.some((l) => l.includes(`local xDS: rejected ${message}`) && l.includes("nothing to serve until it is fixed"))).toBe(true);
    // The same bad bytes again: not reported twice.
    expect((await s.reload()).ok).toBe(false);
    expect(log.lines.filter((l) => l.includes("local xDS: rejected")).length).toBe(1);
    expect(await ads.quiet()).toBe(true);

    writeText(bad, "clusters:\n  - name: x\n    type: EDS\n");
    expect((await s.reload()).ok).toBe(true);
    const r = decodeAs(envoy, "envoy.service.discovery.v3.DiscoveryResponse", await ads.next());
    expect(
      r.resources.map((a: { value: Uint8Array }) => decodeAs(envoy, "envoy.config.cluster.v3.Cluster", a.value)).map((c: any) => [c.name, c.type]),
    ).toEqual([["x", "EDS"]]);
    expect(readiness.isReady()).toBe(true);
  } finally {
    ads.close();
    ctl.abort();
    await s.stopped();
  }
}, 30_000);

test("the converter failing (not the file): the last good set stays, nothing is remembered against the bytes, and a watched file is tried again", async () => {
  const path = join(tmp.dir, "retry.yaml");
  writeText(path, "clusters:\n  - name: a\n    type: EDS\n");
  const log = memoryLogger("all:info");
  const calls: string[] = [];
  let failNext = 0;
  const real = childConverter({ command: SELF, log: log.log });
  const convert: Converter = async (p, bytes) => {
    calls.push(new TextDecoder().decode(bytes));
    if (failNext > 0) {
      failNext--;
      throw new LocalXdsConvertError(`${p}: the converter (test) exited with code 70: boom`, p);
    }
    return real(p, bytes);
  };
  const src = new XdsFileSource({ path, displayPath: "retry.yaml", convert, log: log.log, pollMs: 0, debounceMs: 10 });
  const first = await src.reload();
  expect(first.ok).toBe(true);
  const good = src.current().version;

  writeText(path, "clusters:\n  - name: b\n    type: EDS\n");
  failNext = 2;
  // Not watched: each reload tries the same bytes again (a rejection would be remembered).
  expect((await src.reload()).ok).toBe(false);
  expect((await src.reload()).ok).toBe(false);
  expect(calls.length).toBe(3);
  expect(src.current().version).toBe(good);
  expect(
    log.lines.filter((l) => l.includes("local xDS: cannot load retry.yaml: the converter (test) exited with code 70: boom; still serving version " + good))
      .length,
  ).toBe(2);

  // Watched: after a failure it is tried again on its own (1 s after the first), with no change to the file.
  failNext = 1;
  const watched = new XdsFileSource({ path, displayPath: "retry.yaml", convert, log: log.log, pollMs: 0, debounceMs: 10 });
  const ctl = new AbortController();
  watched.watch(ctl.signal);
  const updated = new Promise<Snapshot>((r) => watched.onUpdate((s) => r(s)));
  try {
    expect((await watched.reload()).ok).toBe(false);
    expect(log.lines.at(-1)).toEndWith("nothing to serve until it is fixed; trying again in 1 s");
    const s = await updated;
    expect([...s.types.get(CLUSTER_TYPE)!.keys()]).toEqual(["b"]);
    expect(calls.length).toBe(5);
  } finally {
    ctl.abort();
  }
}, 30_000);
