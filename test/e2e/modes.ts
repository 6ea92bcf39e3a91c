// The two ways the e2e suite runs the compiled agent, behind one small interface so the case
// bodies (suite.ts) are shared: `istiod` (fake istiod + fake CA, mesh.ts) and `local`
// (LOCAL_XDS_PATH + CA_PROVIDER=local, no control plane). Both use the xds-envoy.ts stand-in,
// terminationDrainDuration 1s, and route xds:///greeter.demo:50051 to one greeter port.

import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bigClusters } from "./big-config.ts";
import { greeterTable } from "./envoy-resources.ts";
import { startMesh } from "./mesh.ts";
import { envoyRecords, killRecordedEnvoys, startPod, xdsYamlWithPort, type Pod } from "./pod.ts";
import { writeE2eEnvoyLauncher, type E2eEnvoyRecord } from "./xds-envoy.ts";

export const SPIFFE_ID = "spiffe://cluster.local/ns/demo/sa/greeter-client";
/** ProxyConfig.terminationDrainDuration of every scene. */
export const TERMINATION_DRAIN_MS = 1000;

export interface Scene {
  pod: Pod;
  /** The Envoy stand-in's records. */
  records(): E2eEnvoyRecord[];
  /** A config push: route the greeter target to 127.0.0.1:`port`. */
  route(port: number): Promise<void>;
  /** Keep pushing ~300 KiB Cluster responses (big-config.ts) until the returned stop is called. */
  startBigPushes(): () => Promise<void>;
  cleanup(): Promise<void>;
}

export interface Mode {
  name: "istiod" | "local";
  /** `env` is added to the agent's env (and so Envoy's). */
  start(opts: { greeterPort: number; env?: Record<string, string> }): Promise<Scene>;
}

const drain = { terminationDrainDuration: `${TERMINATION_DRAIN_MS / 1000}s`, drainDuration: "2s" };

export const istiodMode: Mode = {
  name: "istiod",
  async start({ greeterPort, env }) {
    const mesh = await startMesh(greeterTable(greeterPort), { env, proxyConfig: drain });
    return {
      pod: mesh.pod,
      records: mesh.records,
      route: async (port) => mesh.xds.setTable(greeterTable(port)),
      startBigPushes() {
        mesh.xds.bigPushes(true);
        return async () => mesh.xds.bigPushes(false);
      },
      cleanup: () => mesh.cleanup(),
    };
  },
};

/** Replace `path` atomically (as an editor or a ConfigMap update would), so the agent never reads our half-written file. */
function replaceFile(path: string, text: string): void {
  writeFileSync(`${path}.next`, text);
  renameSync(`${path}.next`, path);
}

export const localMode: Mode = {
  name: "local",
  async start({ greeterPort, env }) {
    const work = mkdtempSync(join(tmpdir(), "agent-e2e-local-"));
    const recordFile = join(work, "envoy-record.jsonl");
    const pod = await startPod({
      env: { LOCAL_XDS_PATH: "xds.yaml", CA_PROVIDER: "local", FAKE_ENVOY_RECORD: recordFile, ...env },
      proxyConfig: { controlPlaneAuthPolicy: "NONE", binaryPath: writeE2eEnvoyLauncher(work), ...drain },
      files: { "xds.yaml": xdsYamlWithPort(greeterPort) },
    });
    const xdsFile = pod.path("xds.yaml");
    return {
      pod,
      records: () => envoyRecords(recordFile),
      route: async (port) => replaceFile(xdsFile, xdsYamlWithPort(port)),
      startBigPushes() {
        // Past the server's 50 ms quiet period each time, so every generation is read and pushed.
        let on = true;
        const loop = (async () => {
          for (let gen = 1; on; gen++) {
            replaceFile(xdsFile, JSON.stringify({ clusters: bigClusters(gen) }));
            await Bun.sleep(120);
          }
        })();
        return async () => {
          on = false;
          await loop;
        };
      },
      async cleanup() {
        pod.kill();
        killRecordedEnvoys(recordFile);
        pod.box.cleanup();
        rmSync(work, { recursive: true, force: true });
      },
    };
  },
};
