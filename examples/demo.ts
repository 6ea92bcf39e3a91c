// The demo (`npm run demo`, or `bun examples/demo.ts` after `bun build.ts --host`): the compiled
// agent in local mode on this machine, no Kubernetes, no istiod. It starts a gRPC greeter on
// 127.0.0.1:<random>, writes examples/xds.yaml with that port into a temporary root directory,
// runs `dist/agent proxy sidecar` there (LOCAL_XDS_PATH, CA_PROVIDER=local, OUTPUT_CERTS), waits
// for the gRPC bootstrap and readiness, then a proxyless @grpc/grpc-js-xds client resolves
// xds:///greeter.demo:50051 through the agent's socket and calls the greeter. It prints what
// happened in a few lines and stops the agent with SIGTERM. Every wait is bounded (20 s) and a
// failure names the step that did not happen, followed by the agent's last log lines.
//
// Env: DEMO_VERBOSE=1 streams the agent's log; DEMO_KEEP=1 keeps the temporary root.

import "reflect-metadata";
import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import * as x509 from "@peculiar/x509";
import * as grpcXds from "@grpc/grpc-js-xds";
import YAML from "yaml";
import { greeterClient, startGreeter } from "./greeter.ts";

const REPO = resolve(import.meta.dir, "..");
const AGENT = join(REPO, "dist", "agent");
const TARGET = "xds:///greeter.demo:50051";
const STEP_TIMEOUT_MS = 20_000;
const verbose = process.env.DEMO_VERBOSE === "1";

class DemoStepError extends Error {}

const say = (line: string) => console.log(`demo: ${line}`);

function fail(step: string, why: string): never {
  throw new DemoStepError(`${step}: ${why}`);
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

function which(bin: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const p = join(dir, bin);
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

/** Poll `probe` until it returns a value, or fail the step after STEP_TIMEOUT_MS. */
async function waitFor<T>(step: string, probe: () => Promise<T | undefined> | T | undefined, why: () => string, agent: ChildProcess): Promise<T> {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (agent.exitCode !== null || agent.signalCode !== null) fail(step, `the agent exited early (${agent.exitCode ?? agent.signalCode})`);
    const v = await probe();
    if (v !== undefined) return v;
    await Bun.sleep(100);
  }
  fail(step, `${why()} (waited ${STEP_TIMEOUT_MS / 1000}s)`);
}

async function main(): Promise<number> {
  if (!existsSync(AGENT)) {
    console.error(`demo: ${AGENT} not found: build it first with \`bun build.ts --host\` (or run \`npm run demo\`)`);
    return 1;
  }
  const root = mkdtempSync(join(tmpdir(), "agent-demo-"));
  const logTail: string[] = [];
  let servedLine: string | undefined;
  let agent: ChildProcess | undefined;
  let greeter: Awaited<ReturnType<typeof startGreeter>> | undefined;
  let client: ReturnType<typeof greeterClient> | undefined;
  let ok = false;
  try {
    // 1. The application: a real gRPC server on a random loopback port.
    greeter = await startGreeter("greeter-1");
    say(`greeter gRPC server listening on 127.0.0.1:${greeter.port}`);

    // 2. The mesh: examples/xds.yaml with the greeter's port, examples/mesh.yaml as mesh config.
    const xds = YAML.parse(readFileSync(join(REPO, "examples", "xds.yaml"), "utf8"));
    xds.endpoints[0].endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = greeter.port;
    writeFileSync(join(root, "xds.yaml"), YAML.stringify(xds));
    mkdirSync(join(root, "etc", "istio", "config"), { recursive: true });
    copyFileSync(join(REPO, "examples", "mesh.yaml"), join(root, "etc", "istio", "config", "mesh"));

    // 3. The agent, started as a pod would start it (cwd = its root), in local mode.
    const envoy = which("envoy");
    const statusPort = await freePort();
    const proxyConfig: Record<string, unknown> = { statusPort, proxyAdminPort: await freePort(), controlPlaneAuthPolicy: "NONE" };
    if (envoy) proxyConfig.binaryPath = envoy;
    const certDir = join(root, "etc", "certs");
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: process.env.HOME ?? root,
      LOCAL_XDS_PATH: "xds.yaml",
      CA_PROVIDER: "local",
      OUTPUT_CERTS: certDir,
      DISABLE_ENVOY: envoy ? "false" : "true",
      POD_NAME: "greeter-client-0",
      POD_NAMESPACE: "demo",
      SERVICE_ACCOUNT: "greeter-client",
      INSTANCE_IP: "127.0.0.1",
      PROXY_CONFIG: JSON.stringify(proxyConfig),
    };
    agent = spawn(AGENT, ["proxy", "sidecar"], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    const onLine = (chunk: Buffer) => {
      for (const line of chunk.toString().split("\n").filter(Boolean)) {
        logTail.push(line);
        if (line.includes("local xDS: serving")) servedLine = line.slice(line.indexOf("local xDS: serving"));
        if (logTail.length > 40) logTail.shift();
        if (verbose) console.log(`  agent | ${line}`);
      }
    };
    agent.stdout!.on("data", onLine);
    agent.stderr!.on("data", onLine);
    const spawned = await new Promise<Error | undefined>((res) => {
      agent!.once("spawn", () => res(undefined));
      agent!.once("error", res);
    });
    if (spawned) fail("start the agent", spawned.message);
    say(`agent started (pid ${agent.pid}) in ${root}: ${envoy ? `with Envoy ${envoy}` : "proxyless (no envoy on PATH: DISABLE_ENVOY=true)"}`);

    // 4. The agent writes the gRPC bootstrap pointing at its own XDS socket.
    const bootstrapPath = join(root, "etc", "istio", "proxy", "grpc-bootstrap.json");
    const bootstrap = await waitFor(
      "gRPC bootstrap",
      () => (existsSync(bootstrapPath) ? JSON.parse(readFileSync(bootstrapPath, "utf8")) : undefined),
      () => `the agent did not write ${bootstrapPath}`,
      agent,
    );
    const serverUri: string = bootstrap.xds_servers?.[0]?.server_uri ?? "";
    say(`gRPC bootstrap ${bootstrapPath} -> ${serverUri}`);
    const xdsSocket = serverUri.startsWith("unix://") ? serverUri.replace(/^unix:\/\//, "/").replace(/^\/+/, "/") : undefined;
    if (xdsSocket)
      await waitFor(
        "XDS socket",
        () => (existsSync(xdsSocket) ? true : undefined),
        () => `the agent is not listening on ${xdsSocket}`,
        agent,
      );

    // 5. The proxyless client: grpc-js-xds reads GRPC_XDS_BOOTSTRAP and dials the agent's socket.
    process.env.GRPC_XDS_BOOTSTRAP = bootstrapPath;
    grpcXds.register();
    client = greeterClient(TARGET);
    const answers: string[] = [];
    for (const name of ["alice", "bob", "carol"]) {
      try {
        answers.push(await client.sayHello(name, STEP_TIMEOUT_MS));
      } catch (e) {
        fail(
          "proxyless gRPC call",
          `${TARGET} failed: ${(e as Error).message} (no route via ${serverUri}: did the agent serve LOCAL_XDS_PATH=xds.yaml through its XDS socket?)`,
        );
      }
    }
    // 6. Readiness from the status server (after the first calls: in proxyless mode the relay
    //    connects upstream when the first xDS client connects).
    let lastReady = "no answer";
    const readyUrl = `http://127.0.0.1:${statusPort}/healthz/ready`;
    const readyBody = await waitFor(
      "readiness",
      async () => {
        try {
          const r = await fetch(readyUrl, { signal: AbortSignal.timeout(1000) });
          const body = (await r.text()).trim();
          lastReady = `${r.status} ${body.replace(/\s+/g, " ").slice(0, 200)}`;
          return r.status === 200 ? body || "ok" : undefined;
        } catch (e) {
          lastReady = (e as Error).message;
          return undefined;
        }
      },
      () => `GET ${readyUrl} never answered 200; last answer: ${lastReady}`,
      agent,
    );

    say(`config served: ${servedLine ?? "xds.yaml (1 listener, 1 route, 1 cluster, 1 endpoint) over the agent's XDS socket"}`);

    // 7. The certificate the local CA issued, as written to OUTPUT_CERTS.
    const certFile = join(certDir, "cert-chain.pem");
    const pem = await waitFor(
      "certificate",
      () => (existsSync(certFile) ? readFileSync(certFile, "utf8") : undefined),
      () => `no certificate in ${certFile} (CA_PROVIDER=local, OUTPUT_CERTS=${certDir})`,
      agent,
    );
    const cert = new x509.X509Certificate(pem);
    const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
    const spiffe = san?.names.items.find((n) => n.type === "url")?.value ?? "(no URI SAN)";
    const hours = ((cert.notAfter.getTime() - Date.now()) / 3_600_000).toFixed(1);
    say(`certificate issued: ${spiffe}, expires ${cert.notAfter.toISOString()} (in ${hours}h), issuer ${cert.issuer}`);

    say(
      `calls routed: ${answers.length}/3 through ${TARGET} to 127.0.0.1:${greeter.port} (greeter counted ${greeter.calls()}); last answer "${answers.at(-1)}"`,
    );
    say(`readiness: GET /healthz/ready -> 200${readyBody && readyBody !== "ok" ? ` ${readyBody.slice(0, 80)}` : ""}`);

    // 8. Stop: SIGTERM, as the kubelet would.
    client.close();
    client = undefined;
    agent.kill("SIGTERM");
    const code = await Promise.race([
      new Promise<number | string>((res) => agent!.once("exit", (c, s) => res(c ?? s ?? "?"))),
      Bun.sleep(STEP_TIMEOUT_MS).then(() => undefined),
    ]);
    if (code === undefined) fail("stop the agent", "the agent did not exit after SIGTERM");
    say(`agent stopped on SIGTERM (exit ${code})`);
    ok = true;
    return 0;
  } catch (e) {
    console.error(`demo: FAILED at ${e instanceof DemoStepError ? e.message : (e as Error).stack}`);
    if (logTail.length)
      console.error(
        `demo: the agent's last log lines:\n${logTail
          .slice(-15)
          .map((l) => `  agent | ${l}`)
          .join("\n")}`,
      );
    return 1;
  } finally {
    client?.close();
    greeter?.stop();
    if (agent && agent.exitCode === null && agent.signalCode === null) agent.kill("SIGKILL");
    if (process.env.DEMO_KEEP === "1" || !ok) say(`temporary root kept: ${root}`);
    else rmSync(root, { recursive: true, force: true });
  }
}

process.exit(await main());
